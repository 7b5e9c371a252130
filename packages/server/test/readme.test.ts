import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { badEntries, parseCatalogue } from '../src/images/validate.ts';
import { partnerApi } from './client.ts';
import { startTestServer, type TestServer, testDatabases } from './harness.ts';
import { partnerWithModes } from './provisioning.ts';

/**
 * The README as a newcomer uses it on a fresh clone: what it links to and names is in the repository,
 * the files its commands take exist (and the catalogue it validates passes), and the answers it shows
 * are the server's.
 */
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const README = readFileSync(join(ROOT, 'README.md'), 'utf8');

/** Every file name in the repository (not its dependencies), for names the README gives without a path. */
function repositoryFiles(dir = ROOT, names = new Set<string>()): Set<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (['node_modules', '.git', '.tenantry', 'test-artifacts'].includes(entry.name)) continue;
    if (entry.isDirectory()) repositoryFiles(join(dir, entry.name), names);
    else names.add(entry.name);
  }
  return names;
}

/** The shell blocks of a Markdown text, line by line. */
const shellLines = (markdown: string) => [...markdown.matchAll(/```sh\n([\s\S]*?)```/g)].flatMap((block) => (block[1] ?? '').split('\n'));

describe('the README on a fresh clone', () => {
  test('every link and every Markdown file it names is in the repository; the docs link only within it too', () => {
    const files = repositoryFiles();
    for (const name of new Set([...README.matchAll(/[\w./-]+\.md\b/g)].map((m) => m[0]))) {
      assert.ok(files.has(name.split('/').at(-1) ?? name), `README names ${name}, which is not in the repository`);
    }
    const documents = [
      'README.md',
      ...readdirSync(join(ROOT, 'docs'))
        .filter((f) => f.endsWith('.md'))
        .map((f) => `docs/${f}`),
    ];
    for (const document of documents) {
      const text = readFileSync(join(ROOT, document), 'utf8');
      const base = document.includes('/') ? join(ROOT, 'docs') : ROOT;
      for (const [, target] of text.matchAll(/\]\(([^)#\s]+)(?:#[^)]*)?\)/g)) {
        if (!target || /^[a-z]+:/.test(target)) continue;
        assert.ok(existsSync(join(base, target)), `${document} links to ${target}, which is not in the repository`);
      }
    }
  });

  test('the files its commands take exist, and the catalogue it validates passes', () => {
    // The commands, without the answers and notes the README writes as comments.
    const lines = shellLines(README)
      .map((line) => line.replace(/(^|\s)#.*$/, ''))
      .filter((line) => line.trim() !== '');
    const paths = lines.flatMap((line) => [...line.matchAll(/(?<=\s|^)(?:\.\/)?(?:[\w.-]+\/)+[\w.-]+\.\w+(?=\s|$)/g)].map((m) => m[0]));
    assert.ok(paths.length >= 2, paths.join(' '));
    for (const path of paths) assert.ok(existsSync(join(ROOT, path)), `a README command takes ${path}, which does not exist`);
    const validated = lines.flatMap((line) => [...(/tenantry images validate (\S+)/.exec(line) ?? [])].slice(1));
    assert.ok(validated.length > 0, 'the README validates a catalogue');
    for (const file of validated) {
      assert.deepEqual(badEntries(parseCatalogue(readFileSync(join(ROOT, file), 'utf8'))), [], `${file} passes`);
    }
  });
});

const target = testDatabases()[0];
if (target) {
  describe('the README shows what the server answers', () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer(target);
    });
    after(() => server.stop());

    test('POST /webhook/test without a webhook: the NOT_CONFIGURED answer the walkthrough shows', async () => {
      const { live } = await partnerWithModes(server, 'readme');
      const answer = await partnerApi<{ error: { code: string; message: string } }>(server, 'POST', '/webhook/test', { token: live });
      assert.equal(answer.status, 400);
      const shown = `{"status":"error","error":{"code":"${answer.body.error.code}","message":"${answer.body.error.message}","request_id":"req_01..."}}`;
      const walkthrough = shellLines(README);
      const at = walkthrough.findIndex((line) => line.includes('/api/public/v1/webhook/test'));
      assert.ok(at >= 0, 'the walkthrough calls POST /webhook/test');
      assert.equal(walkthrough[at + 1], `# ${shown}`, 'the line after the call is its answer');
    });
  });
}
