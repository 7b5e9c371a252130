import type { Generated } from 'kysely';

export interface ServerSecretsTable {
  name: string;
  value: string;
  created_at: Generated<Date>;
}

/** The tables this module owns, as the composition root merges them into the database type. */
export interface SecretTables {
  server_secrets: ServerSecretsTable;
}
