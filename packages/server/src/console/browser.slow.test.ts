import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { type BrowserContext, chromium, type Page } from 'playwright-core';
import { assertError, partnerApi } from '../../test/client.ts';
import { loginUrl } from '../../test/console-session.ts';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import { activeCustomer, partnerWithModes, type Tokens } from '../../test/provisioning.ts';

/**
 * The console in a real browser: Debian's chromium, driven by playwright-core. A user opens a login
 * link, picks an OS, sees the sizes fill, is refused a size below the image's minimum, creates a VM and
 * sees it listed; reads the quota and is refused a size past it; stops, starts and deletes the VM; signs
 * out. The screenshots are written to packages/server/test-artifacts/ (ignored by git).
 */
const CHROMIUM = '/usr/bin/chromium';
const ARTIFACTS = fileURLToPath(new URL('../../test-artifacts/', import.meta.url));
const skip = existsSync(CHROMIUM)
  ? false
  : `no ${CHROMIUM}: install Debian's chromium (apt-get install -y chromium) to run the browser test`;

for (const target of testDatabases()) {
  describe(`the console in a browser [${target.name}]`, { skip }, () => {
    let server: TestServer;
    let p: Tokens;
    let context: BrowserContext;
    let profile: string;
    const problems: string[] = [];

    before(async () => {
      server = await startTestServer(target);
      p = await partnerWithModes(server, 'browser');
      await activeCustomer(server, p.live, 'acme', {
        display_name: 'Acme Rockets',
        owner: { username: 'alice', email: 'alice@acme.example', first_name: 'Alice', last_name: 'Lovelace' },
      });
      // A fresh profile each run; the machine's network is closed, so nothing in the background may call out.
      profile = mkdtempSync(join(tmpdir(), 'tenantry-chromium-'));
      context = await chromium.launchPersistentContext(profile, {
        executablePath: CHROMIUM,
        headless: true,
        viewport: { width: 1200, height: 900 },
        args: [
          '--headless',
          '--disable-gpu',
          '--disable-quic',
          '--no-first-run',
          '--disable-background-networking',
          '--disable-component-update',
          '--disable-sync',
          ...(process.getuid?.() === 0 ? ['--no-sandbox'] : []),
        ],
      });
    });
    after(async () => {
      await context?.close();
      if (profile) rmSync(profile, { recursive: true, force: true });
      await server?.stop();
    });

    /** Errors the page reports (a script error or a Content-Security-Policy violation). */
    const watch = (page: Page) => {
      page.on('console', (message) => {
        if (message.type() === 'error') problems.push(message.text());
      });
      page.on('pageerror', (error) => problems.push(error.message));
    };

    test('log in through a minted URL, pick an OS, see the sizes fill, create a VM and see it listed', async () => {
      const page = await context.newPage();
      watch(page);
      const images = page.waitForResponse((response) => response.url().endsWith('/api/create-vm/browser-acme-default/os-images'));
      await page.goto(await loginUrl(server, p.live, 'acme', 'alice'));
      assert.equal(new URL(page.url()).pathname, '/console');
      assert.equal((await images).status(), 200, 'the dropdown is filled from the endpoint');
      await page.getByRole('heading', { name: 'Acme Rockets' }).waitFor();
      assert.match(await page.locator('.who').innerText(), /Alice Lovelace/);

      const os = page.locator('select[name="os"]');
      await os.locator('option').nth(1).waitFor({ state: 'attached' });
      const offered = await os.locator('option').allInnerTexts();
      assert.ok(offered.includes('Ubuntu 24.04 LTS') && offered.includes('Windows 11 Enterprise'), offered.join(', '));

      await os.selectOption('Windows 11 Enterprise');
      assert.deepEqual(await sizes(page), ['4', '8', '64'], 'Windows 11 minimums fill the form');
      assert.match(await page.locator('#os-details').innerText(), /UEFI/);
      await os.selectOption('Rocky Linux 9');
      assert.deepEqual(await sizes(page), ['1', '2', '20'], 'another image, its own minimums');

      // Below the minimum: the browser refuses to send the form.
      await page.locator('input[name="name"]').fill('web-1');
      await page.locator('input[name="storage_gib"]').fill('5');
      await page.getByRole('button', { name: 'Create VM' }).click();
      assert.equal(new URL(page.url()).search, '', 'the form was not sent');
      assert.match(
        await page
          .locator('input[name="storage_gib"]')
          .evaluate((input) => (input as unknown as { validationMessage: string }).validationMessage),
        /at least 20/,
      );

      await page.locator('input[name="storage_gib"]').fill('25');
      await page.locator('input[name="memory_gib"]').fill('4');
      mkdirSync(ARTIFACTS, { recursive: true });
      await page.screenshot({ path: join(ARTIFACTS, `console-form-${target.name}.png`), fullPage: true });
      await Promise.all([
        page.waitForURL(/\/console\?project=default&created=web-1/),
        page.getByRole('button', { name: 'Create VM' }).click(),
      ]);
      const row = page.locator('#vms tbody tr', { hasText: 'web-1' });
      await row.waitFor();
      const cells = await row.locator('td').allInnerTexts();
      assert.deepEqual(cells.slice(0, 7), ['web-1', 'default', 'Rocky Linux 9', '1', '4 GiB', '25 GiB', 'running']);
      assert.match(await page.locator('.notice').innerText(), /web-1 was created/);

      await page.screenshot({ path: join(ARTIFACTS, `console-vm-${target.name}.png`), fullPage: true });
      assert.deepEqual(problems, [], 'no script error and no Content-Security-Policy violation');

      // The VM is a live workload: the customer cannot be deleted while it exists.
      const refused = assertError(await partnerApi(server, 'DELETE', '/customers/acme?mode=immediate', { token: p.live }), 409, 'CONFLICT');
      assert.deepEqual((refused.details as { vms: string[] }).vms, ['browser-acme-default/web-1']);
    });

    test('the quota is shown and a size past what is free is refused before the form is sent', async () => {
      const page = await context.newPage();
      watch(page);
      await page.goto(await loginUrl(server, p.live, 'acme', 'alice'));
      // The standard plan holds 2 vCPU, 8 GiB and 50 GiB; web-1 takes 1 vCPU, 4 GiB and 25 GiB.
      const quota = await page.locator('#quota tbody tr').allInnerTexts();
      assert.deepEqual(
        quota.map((line) => line.split('\t')),
        [
          ['vCPU', '1', '2', '1'],
          ['Memory (GiB)', '4', '8', '4'],
          ['Storage (GiB)', '25', '50', '25'],
        ],
      );
      assert.match(await page.locator('#free-room').innerText(), /1 vCPU · 4 GiB memory · 25 GiB storage/);
      const os = page.locator('select[name="os"]');
      await os.locator('option').nth(1).waitFor({ state: 'attached' });
      await os.selectOption('Rocky Linux 9');
      await page.locator('input[name="name"]').fill('web-2');
      await page.locator('input[name="storage_gib"]').fill('30');
      await page.getByRole('button', { name: 'Create VM' }).click();
      assert.equal(new URL(page.url()).search, '', 'the form was not sent');
      assert.match(
        await page
          .locator('input[name="storage_gib"]')
          .evaluate((input) => (input as unknown as { validationMessage: string }).validationMessage),
        /Your quota has 25 GiB of storage free/,
      );
      assert.deepEqual(problems, []);
    });

    test('stop, start and delete a VM from its row (Delete asks first), then sign out', async () => {
      const page = await context.newPage();
      watch(page);
      await page.goto(await loginUrl(server, p.live, 'acme', 'alice'));
      const state = () => page.locator('#vms tbody tr', { hasText: 'web-1' }).locator('.badge').innerText();
      await Promise.all([page.waitForURL(/stopped=web-1/), page.getByRole('button', { name: 'Stop web-1' }).click()]);
      assert.equal(await state(), 'stopped');
      assert.match(await page.locator('.notice').innerText(), /web-1 was stopped/);
      await Promise.all([page.waitForURL(/started=web-1/), page.getByRole('button', { name: 'Start web-1' }).click()]);
      assert.equal(await state(), 'running');

      // Delete asks; dismissed, nothing is sent.
      page.once('dialog', (dialog) => void dialog.dismiss());
      await page.getByRole('button', { name: 'Delete web-1' }).click();
      assert.match(page.url(), /started=web-1/, 'a dismissed Delete sends nothing');
      page.once('dialog', (dialog) => {
        assert.match(dialog.message(), /Delete web-1 and its disk\?/);
        void dialog.accept();
      });
      await Promise.all([page.waitForURL(/deleted=web-1/), page.getByRole('button', { name: 'Delete web-1' }).click()]);
      assert.equal(await page.locator('#vms tbody tr', { hasText: 'web-1' }).count(), 0);
      await page.screenshot({ path: join(ARTIFACTS, `console-deleted-${target.name}.png`), fullPage: true });

      assert.deepEqual(problems, []);
      // The name appears once in the header; signing out ends the session.
      assert.equal((await page.locator('.who').innerText()).match(/Alice Lovelace/g)?.length, 1);
      await Promise.all([page.waitForURL(/\/console\/signed-out$/), page.getByRole('button', { name: 'Sign out' }).click()]);
      await page.getByRole('heading', { name: 'Signed out' }).waitFor();
      const back = await page.goto(`${server.partnerUrl}/console`);
      assert.equal(back?.status(), 401, 'the console no longer opens');
      // The form's address typed in the bar shows a page, not JSON.
      const typed = await page.goto(`${server.partnerUrl}/console/vms`);
      assert.match((await typed?.headerValue('content-type')) ?? '', /^text\/html/);
    });
  });
}

/** vCPU, memory and storage as the form shows them. */
async function sizes(page: Page): Promise<string[]> {
  return Promise.all(['vcpu', 'memory_gib', 'storage_gib'].map((name) => page.locator(`input[name="${name}"]`).inputValue()));
}
