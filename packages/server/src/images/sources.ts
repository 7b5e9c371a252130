import { open } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { MAX_CATALOGUE_BYTES } from './validate.ts';

/**
 * Where `images.yaml` comes from. The catalogue reads its source every 30 seconds and never waits on it
 * while serving, so a source may be slow or fail: it only has to honour the abort signal or reject.
 */
export interface CatalogueSource {
  /** For logs and `/readyz`: `file /etc/tenantry/images.yaml`, `configmap kube-dc/images-configmap`. */
  readonly description: string;
  read(signal: AbortSignal): Promise<string>;
}

/** The example catalogue shipped with Tenantry, served when TENANTRY_OS_IMAGES_FILE is not set. */
export const BUNDLED_CATALOGUE = fileURLToPath(new URL('./default-images.yaml', import.meta.url));

/** `images.yaml` on disk, typically the `images-configmap` ConfigMap mounted into the pod. */
export class FileSource implements CatalogueSource {
  readonly description: string;
  readonly #path: string;

  constructor(path: string, description = `file ${path}`) {
    this.#path = path;
    this.description = description;
  }

  async read(signal: AbortSignal): Promise<string> {
    // Opened once, so the size checked is the size read, even while kubelet swaps the mount's symlink.
    const handle = await open(this.#path, 'r');
    try {
      const { size } = await handle.stat();
      if (size > MAX_CATALOGUE_BYTES) throw new Error(`${this.#path} is ${size} bytes; a catalogue holds at most ${MAX_CATALOGUE_BYTES}`);
      return await handle.readFile({ encoding: 'utf8', signal });
    } finally {
      await handle.close();
    }
  }
}

export const bundledSource = (): CatalogueSource => new FileSource(BUNDLED_CATALOGUE, 'bundled example catalogue');
