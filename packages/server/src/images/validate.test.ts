import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { stringify } from 'yaml';
import { minimumsOf, type OsImage } from './fields.ts';
import { BUNDLED_CATALOGUE } from './sources.ts';
import { badEntries, parseCatalogue } from './validate.ts';

const BASE = {
  OS_NAME: 'Ubuntu 24.04 LTS',
  CLOUD_USER: 'ubuntu',
  OS_IMAGE_URL: 'https://cloud-images.ubuntu.com/noble/current/noble-server-cloudimg-amd64.img',
};
const catalogue = (...entries: unknown[]) => stringify({ images: entries });

/** The problems of a one-entry catalogue whose entry is BASE with `fields` changed. */
function problemsOf(fields: Record<string, unknown>): { field: string; message: string }[] {
  const report = parseCatalogue(catalogue({ ...BASE, ...fields }));
  assert.deepEqual(report.errors, [], 'the document itself is fine');
  return badEntries(report).flatMap((entry) => entry.problems.map(({ field, message }) => ({ field, message })));
}

/** Each field's rule: values it takes, and values it refuses with (part of) the reason. */
const RULES: { field: string; good: string[]; bad: [string, RegExp][] }[] = [
  {
    field: 'OS_NAME',
    good: ['Debian 12 (bookworm)', 'Windows Server 2022'],
    bad: [
      ['', /required/],
      ['  ', /must not be empty/],
      [' Ubuntu', /spaces/],
      ['a\tb', /control/],
      ['x'.repeat(101), /at most 100/],
    ],
  },
  {
    field: 'CLOUD_USER',
    good: ['ubuntu', 'Administrator', 'kube-dc', '_svc'],
    bad: [
      ['', /required/],
      ['1root', /user name/],
      ['a b', /user name/],
      ['x'.repeat(33), /user name/],
    ],
  },
  {
    field: 'OS_IMAGE_URL',
    good: [
      'https://x.example/a.qcow2',
      'http://mirror.lan/img/disk.raw',
      'https://x.example/w.vmdk',
      'https://x.example/a.qcow2.xz',
      'https://x.example/disk.img.gz',
      'https://x.example/d.raw.zst',
      'https://x.example/a.QCOW2?sig=1',
      'https://x.example/a.img.bz2',
    ],
    bad: [
      ['', /required/],
      ['cloud-images/noble.img', /absolute http/],
      ['ftp://x.example/a.qcow2', /http or https/],
      ['file:///srv/a.qcow2', /http or https/],
      ['https://user:secret@x.example/a.qcow2', /credentials/],
      ['https://x.example/win11.iso', /ISO/],
      ['https://x.example/image', /disk image file/],
      ['https://x.example/a.tar.gz', /disk image file/],
      ['https://x.example/qcow2', /disk image file/],
    ],
  },
  {
    field: 'MIN_MEMORY',
    good: ['1G', '512M', '1.5G', '1024G'],
    bad: [
      ['2Gi', /suffix G or M/],
      ['2', /suffix G or M/],
      ['2g', /suffix G or M/],
      ['0G', /more than zero/],
      ['2T', /suffix G or M/],
      ['2048G', /largest VM/],
      ['-1G', /suffix/],
    ],
  },
  {
    field: 'MIN_VCPU',
    good: ['1', '4', '128'],
    bad: [
      ['0', /whole number/],
      ['1.5', /whole number/],
      ['two', /whole number/],
      ['04', /whole number/],
      ['129', /largest VM/],
    ],
  },
  {
    field: 'MIN_STORAGE',
    good: ['20G', '2G', '0.5G', '16384G'],
    bad: [
      ['20', /suffix G/],
      ['20M', /suffix G/],
      ['1T', /suffix G/],
      ['0G', /more than zero/],
      ['20000G', /largest VM/],
    ],
  },
  {
    field: 'FIRMWARE_TYPE',
    good: ['bios', 'efi'],
    bad: [
      ['uefi', /"bios" or "efi"/],
      ['EFI', /"bios" or "efi"/],
    ],
  },
  {
    field: 'MACHINE_TYPE',
    good: ['q35', 'pc-q35-rhel8.6.0', 'pc-i440fx-9.0'],
    bad: [
      ['Q35', /machine type/],
      ['q 35', /machine type/],
    ],
  },
  {
    field: 'FEATURES',
    good: ['acpi', 'acpi,apic', 'hyperv, acpi, apic, smm, tpm'],
    bad: [
      ['acpi,,tpm', /without empty items/],
      ['acpi,', /without empty items/],
      ['acpi,kvm', /feature "kvm" must be one of/],
      ['acpi,acpi', /twice/],
    ],
  },
  {
    field: 'CLOUD_INIT',
    good: [
      '#cloud-config\npackages:\n  - qemu-guest-agent\n',
      '#cloud-config\n',
      '#!/bin/sh\necho hello\n',
      '## template: jinja\n#cloud-config\nhostname: {{ v1.local_hostname }}\n',
      '#include\nhttps://x.example/more.yaml\n',
      'Content-Type: multipart/mixed; boundary="==b=="\nMIME-Version: 1.0\n',
      '#ps1_sysnative\nSet-TimeZone UTC\n',
    ],
    bad: [
      ['   \n', /empty user-data/],
      ['packages: [curl]\n', /must start with "#cloud-config"/],
      ['#cloud-config\npackages: [curl]\nhostname: a: b\n', /not valid cloud-config YAML at its line 3/],
      ['#cloud-config\n- a list\n', /not a mapping/],
      ['#cloud-config\na: 1\na: 2\n', /not valid cloud-config YAML/],
    ],
  },
  {
    field: 'BOOT_ORDER',
    good: ['disk', 'cdrom,disk', 'disk, network'],
    bad: [
      ['disk,,cdrom', /empty items/],
      ['Disk', /device name/],
      ['disk,disk', /twice/],
    ],
  },
  {
    field: 'ADDITIONAL_DISKS',
    good: ['virtio-drivers', 'data:100G'],
    bad: [
      ['  ', /not be empty/],
      ['a\nb', /one line/],
    ],
  },
];

describe('images.yaml validation: every field of the seed table', () => {
  for (const { field, good, bad } of RULES) {
    test(`${field}: takes ${good.length} good values, refuses ${bad.length} bad ones with the reason`, () => {
      for (const value of good) assert.deepEqual(problemsOf({ [field]: value }), [], `${field}: ${JSON.stringify(value)} is good`);
      for (const [value, reason] of bad) {
        const problems = problemsOf({ [field]: value });
        const mine = problems.filter((p) => p.field === field);
        assert.equal(mine.length, 1, `${field}: ${JSON.stringify(value)} is bad: ${JSON.stringify(problems)}`);
        assert.match(mine[0]?.message ?? '', reason);
      }
    });
  }

  test('optional fields may be left out; an empty optional field reads as not set (a warning), except CLOUD_INIT', () => {
    assert.deepEqual(problemsOf({}), []);
    const report = parseCatalogue(catalogue({ ...BASE, MIN_MEMORY: '', MIN_VCPU: null }));
    assert.equal(report.valid, true);
    assert.deepEqual(report.images, [BASE], 'the empty fields are not served');
    assert.deepEqual(
      report.reports[0]?.warnings.map((w) => w.field),
      ['MIN_MEMORY', 'MIN_VCPU'],
    );
    assert.match(problemsOf({ CLOUD_INIT: '' })[0]?.message ?? '', /empty user-data/);
  });

  test('every value is a string: a number, a boolean, a list or a mapping is refused and the line named', () => {
    const text = `images:
  - OS_NAME: "Debian 12"
    CLOUD_USER: debian
    OS_IMAGE_URL: https://x.example/debian.qcow2
    MIN_VCPU: 2
    MIN_MEMORY: 2G
    FEATURES: [acpi, apic]
    FIRMWARE_TYPE: {type: efi}
    MACHINE_TYPE: true
`;
    const report = parseCatalogue(text);
    const entry = badEntries(report)[0];
    assert.equal(entry?.index, 0);
    assert.equal(entry?.name, 'Debian 12');
    assert.deepEqual(
      entry?.problems.map((p) => [p.field, p.line, p.message]),
      [
        ['MIN_VCPU', 5, 'must be a string, got the number 2 (quote it: "2")'],
        ['FIRMWARE_TYPE', 8, 'must be a string, got a mapping'],
        ['MACHINE_TYPE', 9, 'must be a string, got the boolean true (quote it: "true")'],
        ['FEATURES', 7, 'must be a string, got a list'],
      ].sort(
        (a, b) =>
          ['FIRMWARE_TYPE', 'MACHINE_TYPE', 'FEATURES'].indexOf(String(a[0])) -
          ['FIRMWARE_TYPE', 'MACHINE_TYPE', 'FEATURES'].indexOf(String(b[0])),
      ),
    );
    assert.equal(report.valid, false);
  });

  test('strict YAML: a duplicate key, a syntax error, a non-mapping or a missing list is a document error with its line', () => {
    const duplicate = parseCatalogue('images:\n  - OS_NAME: a\n    OS_NAME: b\n');
    assert.equal(duplicate.valid, false);
    assert.match(duplicate.errors[0]?.message ?? '', /not valid YAML: Map keys must be unique/);
    assert.equal(duplicate.errors[0]?.line, 3);
    assert.match(parseCatalogue('images:\n  - OS_NAME: "a\n').errors[0]?.message ?? '', /not valid YAML/);
    assert.match(parseCatalogue('- a\n- b\n').errors[0]?.message ?? '', /must be a mapping with an `images:` list/);
    assert.match(parseCatalogue('image:\n  - {}\n').errors[0]?.message ?? '', /is missing/);
    assert.match(parseCatalogue('images: ubuntu\n').errors[0]?.message ?? '', /must be a list/);
    assert.match(parseCatalogue('images: !!binary aGk=\n').errors[0]?.message ?? '', /must be a list/);
    assert.match(parseCatalogue('images:\n  - !custom x\n').errors[0]?.message ?? '', /not valid YAML/, 'unresolved tags are errors');
    assert.match(parseCatalogue(`images: []\n#${'x'.repeat(1024 * 1024)}`).errors[0]?.message ?? '', /larger than/);
  });

  test('an entry that is not a mapping is bad; unknown keys are warnings with a suggestion, and are not served', () => {
    const report = parseCatalogue(catalogue('ubuntu', { ...BASE, MIN_MEMROY: '2G', os_name: 'x', OS_IMAGE_SHA256: 'abc' }));
    assert.deepEqual(
      badEntries(report).map((e) => [e.index, e.problems[0]?.message]),
      [[0, 'must be a mapping of fields (OS_NAME: ..., CLOUD_USER: ...)']],
    );
    const warned = report.reports.find((r) => r.index === 1);
    assert.deepEqual(
      warned?.warnings.map((w) => w.message),
      [
        'is not a field of the catalogue and is not served (did you mean MIN_MEMORY?)',
        'is not a field of the catalogue and is not served (did you mean OS_NAME?)',
        'is not a field of the catalogue and is not served',
      ],
    );
    assert.deepEqual(report.images, [BASE], 'the good entry is served with the seed fields only');
    assert.equal(report.valid, false, 'one bad entry makes the file bad');
  });

  test('Windows 11 needs efi firmware and the tpm feature; other Windows versions do not', () => {
    const windows = { OS_NAME: 'Windows 11 Pro', CLOUD_USER: 'Administrator', OS_IMAGE_URL: 'https://x.example/w11.qcow2' };
    const problems = (fields: Record<string, string>) => problemsOf({ ...windows, ...fields }).map((p) => p.field);
    assert.deepEqual(problems({}), ['FIRMWARE_TYPE', 'FEATURES']);
    assert.deepEqual(problems({ FIRMWARE_TYPE: 'bios', FEATURES: 'acpi,smm' }), ['FIRMWARE_TYPE', 'FEATURES']);
    assert.deepEqual(problems({ FIRMWARE_TYPE: 'efi', FEATURES: 'acpi,tpm' }), []);
    assert.deepEqual(
      problemsOf({ ...windows, OS_NAME: 'windows11 enterprise', FIRMWARE_TYPE: 'efi' }).map((p) => p.field),
      ['FEATURES'],
      'named any case',
    );
    assert.deepEqual(problemsOf({ ...windows, OS_NAME: 'Windows Server 2022' }), []);
    assert.deepEqual(problemsOf({ ...windows, OS_NAME: 'Windows 110' }), [], 'a word boundary, not a prefix');
  });

  test('two entries with one name: the second is bad (the form tells entries apart by name)', () => {
    const report = parseCatalogue(catalogue(BASE, { ...BASE, CLOUD_USER: 'other' }));
    assert.deepEqual(
      badEntries(report).map((e) => [e.index, e.problems[0]?.field, e.problems[0]?.message]),
      [[1, 'OS_NAME', 'is also the name of images[0]; names must be unique, the form tells entries apart by name']],
    );
  });

  test('every problem of an entry is reported at once, in the table order, with the entry index and name', () => {
    const report = parseCatalogue(
      catalogue(BASE, { OS_NAME: 'Broken', OS_IMAGE_URL: 'ftp://x/a.qcow2', MIN_VCPU: '0', FIRMWARE_TYPE: 'uefi' }),
    );
    assert.deepEqual(
      badEntries(report).map((e) => [e.index, e.name, e.problems.map((p) => p.field)]),
      [[1, 'Broken', ['CLOUD_USER', 'OS_IMAGE_URL', 'MIN_VCPU', 'FIRMWARE_TYPE']]],
    );
    assert.equal(report.entries, 2);
    assert.deepEqual(report.images, [BASE]);
  });

  test('the bundled catalogue is valid: several Linux distributions and a Windows 11 entry', () => {
    const report = parseCatalogue(readFileSync(BUNDLED_CATALOGUE, 'utf8'));
    assert.equal(report.valid, true, JSON.stringify(report.reports));
    assert.deepEqual(report.reports, [], 'no warnings either');
    const names = report.images.map((i) => i.OS_NAME);
    assert.ok(names.filter((n) => /ubuntu|debian|rocky|alma|fedora|suse|alpine/i.test(n)).length >= 5, names.join(', '));
    const windows = report.images.find((i) => /windows 11/i.test(i.OS_NAME)) as OsImage;
    assert.equal(windows.FIRMWARE_TYPE, 'efi');
    assert.match(windows.FEATURES ?? '', /tpm/);
  });

  test('minimums: G and M read as GiB and MiB, rounded up to whole GiB; omitted ones take the defaults', () => {
    assert.deepEqual(minimumsOf({ ...BASE, MIN_MEMORY: '512M', MIN_VCPU: '2', MIN_STORAGE: '2.5G' }), {
      vcpu: 2,
      memoryGib: 1,
      storageGib: 3,
    });
    assert.deepEqual(minimumsOf({ ...BASE, MIN_MEMORY: '1536M' }), { vcpu: 1, memoryGib: 2, storageGib: 10 });
    assert.deepEqual(minimumsOf(BASE), { vcpu: 1, memoryGib: 1, storageGib: 10 });
  });
});
