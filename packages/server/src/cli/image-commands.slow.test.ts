import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { runCli } from '../../test/cli-runner.ts';
import { BUNDLED_CATALOGUE } from '../images/sources.ts';

describe('tenantry images validate <file>', () => {
  let dir: string;
  let bad: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'tenantry-validate-'));
    bad = join(dir, 'images.yaml');
    writeFileSync(
      bad,
      `images:
  - OS_NAME: "Ubuntu 24.04 LTS"
    CLOUD_USER: ubuntu
    OS_IMAGE_URL: "https://cloud-images.ubuntu.com/noble/current/noble-server-cloudimg-amd64.img"
  - OS_NAME: "Windows 11 Pro"
    CLOUD_USER: Administrator
    OS_IMAGE_URL: "https://images.example.com/win11.iso"
    MIN_VCPU: 4
    FIRMWARE_TYPE: "efi"
    FEATURES: "acpi,tpm"
  - OS_NAME: "Debian 12"
    CLOUD_USER: debian
    OS_IMAGE_URL: "https://cloud.debian.org/images/cloud/bookworm/latest/debian-12-generic-amd64.qcow2"
    MIN_MEMROY: "1G"
`,
    );
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('a good file: exit 0 and a one-line summary', async () => {
    const result = await runCli(['images', 'validate', BUNDLED_CATALOGUE], {});
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /: 9 entries, 9 good, 0 bad, 0 warnings\n$/);
  });

  test('a bad file: a table naming each bad entry by index and name, each field, its line and why; exit 1', async () => {
    const result = await runCli(['images', 'validate', bad], {});
    assert.equal(result.code, 1);
    const rows = result.stdout.split('\n').filter((line) => line.startsWith('│') && !line.includes('ENTRY'));
    const cells = rows.map((row) =>
      row
        .split('│')
        .slice(1, -1)
        .map((cell) => cell.trim()),
    );
    assert.deepEqual(
      cells.map(([entry, name, severity, field, line]) => [entry, name, severity, field, line]),
      [
        ['1', 'Windows 11 Pro', 'error', 'OS_IMAGE_URL', '7'],
        ['1', 'Windows 11 Pro', 'error', 'MIN_VCPU', '8'],
        ['2', 'Debian 12', 'warning', 'MIN_MEMROY', '14'],
      ],
    );
    assert.match(result.stdout, /names an ISO installer/);
    assert.match(result.stdout, /did you mean MIN_MEMORY\?/);
    assert.equal(
      result.stderr,
      `tenantry: ${bad}: 3 entries, 2 good, 1 bad, 1 warning; the server keeps its last good catalogue instead\n`,
    );
  });

  test('--json: one document for CI, and the same exit code', async () => {
    const result = await runCli(['images', 'validate', bad, '--json'], {});
    assert.equal(result.code, 1);
    const report = JSON.parse(result.stdout) as {
      valid: boolean;
      entries: number;
      good: number;
      bad: number;
      reports: {
        index: number;
        name: string;
        problems: { field: string; line: number; message: string }[];
        warnings: { field: string }[];
      }[];
    };
    assert.equal(report.valid, false);
    assert.deepEqual([report.entries, report.good, report.bad], [3, 2, 1]);
    assert.deepEqual(
      report.reports.map((r) => [r.index, r.name, r.problems.map((p) => p.field), r.warnings.map((w) => w.field)]),
      [
        [1, 'Windows 11 Pro', ['OS_IMAGE_URL', 'MIN_VCPU'], []],
        [2, 'Debian 12', [], ['MIN_MEMROY']],
      ],
    );
  });

  test('--strict fails on warnings; YAML errors and unreadable files say so in one line', async () => {
    const warned = join(dir, 'warned.yaml');
    writeFileSync(warned, 'images:\n  - OS_NAME: a\n    CLOUD_USER: a\n    OS_IMAGE_URL: https://x.example/a.raw\n    EXTRA: x\n');
    assert.equal((await runCli(['images', 'validate', warned], {})).code, 0);
    const strict = await runCli(['images', 'validate', warned, '--strict'], {});
    assert.equal(strict.code, 1);
    assert.match(strict.stderr, /1 warning \(--strict\)/);
    const broken = join(dir, 'broken.yaml');
    writeFileSync(broken, 'images:\n  - OS_NAME: a\n    OS_NAME: b\n');
    const syntax = await runCli(['images', 'validate', broken], {});
    assert.equal(syntax.code, 1);
    assert.match(syntax.stderr, /^tenantry: .*broken\.yaml is not a catalogue: is not valid YAML: Map keys must be unique\n$/);
    const missing = await runCli(['images', 'validate', join(dir, 'missing.yaml')], {});
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /^tenantry: cannot read .*missing\.yaml: ENOENT\n$/);
  });
});
