import type { Kysely, Transaction } from 'kysely';

/**
 * A database handle typed on the tables its user may touch: the pool, or a transaction a caller
 * opened. A module types its stores on its own tables (`Db<CustomerTables>`), so the compiler refuses
 * a query on another module's table; a service that also calls other modules' services types its
 * handle on their tables too. Only the composition root (`app/database.ts`) knows every table, and a
 * handle on the merged schema is accepted wherever one on fewer tables is asked for. Both kinds are
 * named because TypeScript relates `Transaction<A & B>` to `Transaction<A>` but not to `Kysely<A>`.
 */
export type Db<Tables> = Kysely<Tables> | Transaction<Tables>;
