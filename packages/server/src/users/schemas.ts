import { type Static, Type } from 'typebox';
import { Text } from '../infra/request-schemas.ts';
import { Email, Username } from '../platform/names.ts';
import type { UsersTable } from './tables.ts';

/** CONTRACT §4, Users. */
export const User = Type.Object(
  {
    username: Type.String(),
    email: Type.String(),
    role: Type.Union([Type.Literal('admin'), Type.Literal('member')]),
    is_owner: Type.Boolean(),
    first_name: Type.Union([Type.String(), Type.Null()]),
    last_name: Type.Union([Type.String(), Type.Null()]),
    required_actions: Type.Array(Type.String(), { description: 'Identity-provider actions the user must finish before a console login.' }),
    created_at: Type.String({ format: 'date-time' }),
  },
  { title: 'User' },
);
export type User = Static<typeof User>;

export function toUser(
  row: Pick<UsersTable, 'username' | 'email' | 'role' | 'is_owner' | 'first_name' | 'last_name' | 'required_actions' | 'created_at'>,
): User {
  return {
    username: row.username,
    email: row.email,
    role: row.role,
    is_owner: row.is_owner,
    first_name: row.first_name,
    last_name: row.last_name,
    required_actions: row.required_actions,
    created_at: row.created_at.toISOString(),
  };
}

const PersonName = Text({ minLength: 1, maxLength: 100 });

export const CreateUserRequest = Type.Object(
  {
    username: Username,
    email: Email,
    role: Type.Optional(Type.Union([Type.Literal('admin'), Type.Literal('member')], { default: 'member' })),
    first_name: Type.Optional(PersonName),
    last_name: Type.Optional(PersonName),
  },
  { title: 'CreateUserRequest', additionalProperties: false },
);
export type CreateUserRequest = Static<typeof CreateUserRequest>;

export const DeleteUserResult = Type.Object({ username: Type.String(), deleted: Type.Literal(true) }, { title: 'DeleteUserResult' });

export const ConsoleLoginResult = Type.Object(
  {
    url: Type.String({ description: 'Opens the console as this user, once, before expires_at.' }),
    expires_at: Type.String({ format: 'date-time' }),
  },
  { title: 'ConsoleLogin' },
);
