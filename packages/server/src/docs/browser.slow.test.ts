import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { type BrowserContext, chromium } from 'playwright-core';
import { partnerWithToken } from '../../test/client.ts';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';

/**
 * The API reference in a real browser (Debian's chromium, driven by playwright-core): it opens with the
 * introduction that explains the key-to-token exchange, its authentication panel offers the bearer
 * token, and a call tried from the page carries the pasted token and is answered. The screenshot is
 * written to packages/server/test-artifacts/ (ignored by git).
 */
const CHROMIUM = '/usr/bin/chromium';
const ARTIFACTS = fileURLToPath(new URL('../../test-artifacts/', import.meta.url));
const skip = existsSync(CHROMIUM)
  ? false
  : `no ${CHROMIUM}: install Debian's chromium (apt-get install -y chromium) to run the browser test`;

// The reference does not depend on the database: one is enough.
const target = testDatabases()[0];
if (target) {
  describe('the API reference in a browser', { skip }, () => {
    let server: TestServer;
    let token: string;
    let context: BrowserContext;
    let profile: string;

    before(async () => {
      server = await startTestServer(target);
      ({ token } = await partnerWithToken(server, 'reader'));
      // A fresh profile each run; the machine's network is closed, so nothing in the background may call out.
      profile = mkdtempSync(join(tmpdir(), 'tenantry-chromium-'));
      context = await chromium.launchPersistentContext(profile, {
        executablePath: CHROMIUM,
        headless: true,
        viewport: { width: 1400, height: 1000 },
        args: [
          '--headless',
          '--disable-gpu',
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

    test('it opens with the key-to-token exchange, and a bearer token pasted into its panel is sent with a call tried from the page', async () => {
      const page = await context.newPage();
      const problems: string[] = [];
      page.on('pageerror', (error) => problems.push(error.message));
      await page.goto(`${server.partnerUrl}/docs/`);
      await page.getByRole('heading', { name: 'Authentication: from API key to access token' }).waitFor();
      assert.match(await page.locator('body').innerText(), /A token lives at most 15 minutes/);

      await page.getByPlaceholder('Token').first().fill(token);
      await page.getByText('Describe the partner, scopes, limits and token of the calling token').first().click();
      // The operations' "Test Request" buttons in the order of the document: whoami is the second.
      await page
        .getByRole('button', { name: /Test Request/ })
        .nth(1)
        .click();
      const answered = page.waitForResponse((response) => new URL(response.url()).pathname === '/api/public/v1/auth/whoami');
      await page.getByRole('button', { name: /^Send/ }).first().click();
      const response = await answered;
      assert.equal(response.request().headers().authorization, `Bearer ${token}`);
      assert.equal(response.status(), 200);
      mkdirSync(ARTIFACTS, { recursive: true });
      await page.screenshot({ path: join(ARTIFACTS, 'docs-whoami.png') });
      assert.deepEqual(problems, []);
    });
  });
}
