import { resolve } from 'node:path';
import type { Command } from 'commander';
import { ConfigError } from '../config/config.ts';
import { secretKeyId } from '../infra/secrets/secret-box.ts';
import { DATA_DIR_KEY_FILE, generateSecretKey, rotateDataDirKey } from '../infra/secrets/secret-key.ts';
import { CliError } from './operator-client.ts';
import { printRecord } from './output.ts';

/**
 * The key that seals secrets at rest (docs/security.md, Secrets at rest): make one for
 * TENANTRY_SECRET_KEY or a mounted Secret, or start a rotation of the data directory's key file.
 */
export function registerSecretKeyCommands(program: Command): void {
  const secretKey = program.command('secret-key').description('the key that seals secrets at rest');

  secretKey
    .command('generate')
    .description('print a new random key (for TENANTRY_SECRET_KEY or TENANTRY_SECRET_KEY_FILE)')
    .option('--json', 'print JSON')
    .action((flags: { json?: boolean }) => {
      const key = generateSecretKey();
      const id = secretKeyId(Buffer.from(key, 'hex'));
      if (flags.json) printRecord(true, { key, key_id: id });
      else process.stdout.write(`${key}\n`);
    });

  secretKey
    .command('rotate')
    .description(`put a new active key first in <data dir>/${DATA_DIR_KEY_FILE}; the next start seals every secret with it`)
    .option('--data-dir <dir>', 'the data directory (TENANTRY_DATA_DIR)')
    .option('--json', 'print JSON')
    .action((flags: { dataDir?: string; json?: boolean }) => {
      const dataDir = resolve(flags.dataDir ?? process.env.TENANTRY_DATA_DIR ?? './.tenantry');
      try {
        const rotated = rotateDataDirKey(dataDir);
        printRecord(flags.json === true, {
          file: `${dataDir}/${DATA_DIR_KEY_FILE}`,
          active_key_id: rotated.activeKeyId,
          previous_key_ids: rotated.previousKeyIds,
          next_step: 'restart tenantry serve; once it has started, the previous keys may be removed from the file',
        });
      } catch (error) {
        if (error instanceof ConfigError) throw new CliError(error.message, 2);
        throw error;
      }
    });
}
