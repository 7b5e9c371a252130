import type { Generated, Selectable } from 'kysely';
import type { PlatformScope } from '../auth/tenant.ts';
import type { KeyMode } from '../infra/mode.ts';

export type UserRole = 'admin' | 'member';

/** Where a user is on the platform's identity provider. */
export type UserPlatformState = 'pending' | 'ready' | 'removing';

export interface UsersTable {
  /** Immutable identity: a user created again with the same username is another person. */
  uid: string;
  customer_uid: string;
  platform_scope: PlatformScope;
  partner_id: string;
  mode: KeyMode;
  customer_id: string;
  username: string;
  email: string;
  /** Lower-cased email: uniqueness ignores case. */
  email_key: string;
  role: UserRole;
  is_owner: boolean;
  first_name: string | null;
  last_name: string | null;
  required_actions: string[];
  created_at: Date;
  /** `pending` until the identity provider has the user; `removing` once its deletion started. */
  platform_state: Generated<UserPlatformState>;
  /** When it entered that state (the reconciler finishes what a killed process left). */
  platform_state_at: Date | null;
}

/** The tables this module owns, as the composition root merges them into the database type. */
export interface UserTables {
  users: UsersTable;
}

/** A row of `users` as a query answers it. */
export type UserRow = Selectable<UsersTable>;
