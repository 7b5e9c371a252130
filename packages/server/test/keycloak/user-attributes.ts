import { errorMessage, type Json, Refusal } from './http.ts';
import type { KeycloakUser, Realm } from './model.ts';
import { adminCanEdit, adminCanView, declaration, type UPAttribute, unmanagedEditable, unmanagedVisible } from './user-profile.ts';

/**
 * A user's attributes as the declarative user profile sees them in the admin API (the USER_API
 * context): DefaultAttributes (normalize, validate) and DefaultUserProfile (create, update,
 * toRepresentation) of keycloak/keycloak services/.../userprofile, Keycloak 26.
 */
const ROOT = ['username', 'email', 'firstName', 'lastName'] as const;
const isRoot = (name: string): boolean => (ROOT as readonly string[]).includes(name);

export interface FieldError {
  field: string;
  errorMessage: string;
  params: unknown[];
}

/** The attributes a request carries, keyed by name: UserRepresentation.getRawAttributes. */
export function rawAttributes(rep: Json): Map<string, unknown> {
  const raw = new Map<string, unknown>(Object.entries(isRecord(rep.attributes) ? rep.attributes : {}));
  // username and email are taken from their fields only (getRawAttributes removes them when null);
  // the names are added when sent and otherwise left as the attributes map has them.
  raw.delete('username');
  raw.delete('email');
  if (typeof rep.username === 'string') raw.set('username', [rep.username]);
  if (typeof rep.email === 'string') raw.set('email', [rep.email]);
  for (const name of ['firstName', 'lastName']) if (typeof rep[name] === 'string') raw.set(name, [rep[name]]);
  return raw;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** What the user stores under a name (UserModel.getAttributes: root attributes included). */
export function stored(user: KeycloakUser, name: string): string[] {
  if (isRoot(name)) {
    const value = user[name as (typeof ROOT)[number]];
    return value === undefined ? [] : [value];
  }
  return user.attributes[name] ?? [];
}

/** The names the user stores a value under, root attributes first. */
export function storedNames(user: KeycloakUser): string[] {
  return [...ROOT.filter((n) => stored(user, n).length > 0), ...Object.keys(user.attributes)];
}

/** Values as normalizeAttributeValues makes them: strings only, username and email lower-cased. */
function values(name: string, value: unknown): string[] {
  const list = (Array.isArray(value) ? value : value === undefined || value === null ? [] : [value]).filter(
    (v): v is string => typeof v === 'string',
  );
  return name === 'username' || name === 'email' ? list.map((v) => v.toLowerCase()) : list;
}

/** The profile of one request: the normalized attributes and what the admin context may do with each. */
export class Profile {
  readonly attributes = new Map<string, string[]>();
  readonly #realm: Realm;
  readonly #user: KeycloakUser | undefined;

  constructor(realm: Realm, raw: Map<string, unknown>, user?: KeycloakUser) {
    this.#realm = realm;
    this.#user = user;
    const config = realm.userProfile;
    for (const [name, value] of raw)
      if (declaration(config, name) || unmanagedVisible(config)) this.attributes.set(name, values(name, value));
    // The profile always holds every declared attribute: one not sent is empty, unless the admin may
    // not edit it, in which case it keeps what the user has.
    for (const attribute of config.attributes) {
      if (this.attributes.has(attribute.name)) continue;
      const keep = user !== undefined && !this.#canEdit(attribute);
      const value = keep ? stored(user, attribute.name) : attribute.defaultValue !== undefined ? [attribute.defaultValue] : [];
      this.attributes.set(attribute.name, value);
    }
    if (user && (this.attributes.get('username') ?? []).length === 0 && this.isReadOnly('username'))
      this.attributes.set('username', [user.username]);
    if (realm.registrationEmailAsUsername && (this.attributes.get('email') ?? []).length > 0)
      this.attributes.set('username', this.attributes.get('email') ?? []);
  }

  /** The username edit condition (DeclarativeUserProfileProviderFactory.editUsernameCondition) on top of the permissions. */
  #canEdit(attribute: UPAttribute): boolean {
    if (!adminCanEdit(attribute)) return false;
    if (attribute.name !== 'username') return true;
    if (this.#realm.registrationEmailAsUsername) return false;
    return this.#user === undefined || this.#realm.editUsernameAllowed;
  }

  isReadOnly(name: string): boolean {
    const attribute = declaration(this.#realm.userProfile, name);
    return attribute ? !this.#canEdit(attribute) : !unmanagedEditable(this.#realm.userProfile);
  }

  /**
   * Validates as UserResource.validateUserProfile answers it: a missing username is 400 "User name is
   * missing", a taken username or email 409 "User exists with same username/email" (thrown at once);
   * anything else is 400 with `{field, errorMessage, params}`, or `{errors: [...]}` when there are several.
   */
  validate(): void {
    const errors: FieldError[] = [];
    for (const [name, value] of this.#ordered()) {
      const found = this.#check(name, value);
      const unchanged = this.#user !== undefined && this.isReadOnly(name) && same(stored(this.#user, name), value);
      // A read-only attribute that keeps its old value is let through even if it would fail now.
      if (unchanged) continue;
      for (const error of found)
        if (!errors.some((e) => e.field === error.field && e.errorMessage === error.errorMessage)) errors.push(error);
    }
    for (const error of errors) {
      if (error.errorMessage === 'missingUsernameMessage') throw errorMessage(400, 'User name is missing');
      if (error.errorMessage === 'usernameExistsMessage') throw errorMessage(409, 'User exists with same username');
      if (error.errorMessage === 'emailExistsMessage') throw errorMessage(409, 'User exists with same email');
    }
    if (errors.length === 1) throw new Refusal(400, errors[0]);
    if (errors.length > 1) throw new Refusal(400, { errors });
  }

  #ordered(): Array<[string, string[]]> {
    const rank = (name: string) => {
      const root = (ROOT as readonly string[]).indexOf(name);
      if (root >= 0) return root;
      const declared = this.#realm.userProfile.attributes.findIndex((a) => a.name === name);
      return declared >= 0 ? 10 + declared : 10_000;
    };
    return [...this.attributes].sort(([a], [b]) => rank(a) - rank(b));
  }

  #check(name: string, value: string[]): FieldError[] {
    const realm = this.#realm;
    const errors: FieldError[] = [];
    const present = value.filter((v) => v.trim() !== '');
    const error = (message: string, ...params: unknown[]) => errors.push({ field: name, errorMessage: message, params: [name, ...params] });
    const others = (match: (u: KeycloakUser) => boolean) => [...realm.users.values()].some((u) => u.id !== this.#user?.id && match(u));
    if (name === 'username') {
      // UsernameHasValueValidator, DuplicateUsernameValidator.
      if (present.length === 0 && !realm.registrationEmailAsUsername) error('missingUsernameMessage');
      else if (present[0] !== undefined && others((u) => u.username === present[0])) error('usernameExistsMessage');
    }
    if (name === 'email' && present[0] !== undefined) {
      // DuplicateEmailValidator, then EmailValidator (empty values are not checked).
      if (!realm.duplicateEmailsAllowed && others((u) => u.email === present[0])) error('emailExistsMessage');
      if (!validEmail(present[0])) error('error-invalid-email', present[0]);
    }
    const attribute = declaration(realm.userProfile, name);
    const required = attribute?.required;
    const requiredForAdmin =
      required !== undefined && (required.roles === undefined || required.roles.length === 0 || required.roles.includes('admin'));
    if (requiredForAdmin && present.length === 0) error('error-user-attribute-required');
    const validations = attribute?.validations ?? {};
    // DefaultAttributes.addLengthValidatorIfNotSet: an attribute without a length rule gets 0..2048.
    const rules: Array<[string, Record<string, unknown>]> = Object.entries(validations);
    if (!('length' in validations)) rules.push(['length', { min: '0', max: '2048' }]);
    for (const [validator, config] of rules)
      for (const v of present) {
        const failure = check(validator, config, v, realm.registrationEmailAsUsername);
        if (failure) error(String(failure[0]), ...failure.slice(1));
      }
    return errors;
  }

  /**
   * Writes the attributes the admin may edit onto the user (DefaultUserProfile.updateInternal): empty
   * values remove; on an update with `removeAttributes` (the request carried `attributes`), anything the
   * user had that the request left out is removed too, first and last names included. username and
   * email are never removed that way; email is cleared by the first loop when it is editable and empty.
   */
  apply(user: KeycloakUser, removeAttributes: boolean): void {
    for (const [name, updated] of [...this.attributes].sort(([a], [b]) => a.localeCompare(b))) {
      if (this.isReadOnly(name)) continue;
      if (same(stored(user, name), updated)) continue;
      if (!removeAttributes && updated.length === 0 && !isRoot(name)) continue;
      const kept = updated.filter((v) => v.trim() !== '');
      if (kept.length === 0) remove(user, name);
      else write(user, name, kept);
    }
    if (!removeAttributes) return;
    for (const name of storedNames(user)) {
      if (this.attributes.has(name) || this.isReadOnly(name)) continue;
      if (name === 'firstName' || name === 'lastName' || !isRoot(name)) remove(user, name);
    }
  }
}

function same(a: string[], b: string[]): boolean {
  return a.length === b.length && a.every((v) => b.includes(v));
}

function write(user: KeycloakUser, name: string, value: string[]): void {
  if (name === 'username') user.username = value[0] ?? user.username;
  else if (name === 'email' || name === 'firstName' || name === 'lastName') user[name] = value[0];
  else user.attributes[name] = value;
}

function remove(user: KeycloakUser, name: string): void {
  if (name === 'email' || name === 'firstName' || name === 'lastName') delete user[name];
  else if (name !== 'username') delete user.attributes[name];
}

/** EmailValidationUtil.isValidEmail: dot-atoms of the RFC 5322 atom characters, a local part of at most 64. */
function validEmail(value: string): boolean {
  const at = value.lastIndexOf('@');
  if (at <= 0) return false;
  const local = value.slice(0, at);
  const domain = value.slice(at + 1);
  const atoms = /^[\p{L}\p{N}!#$%&'*+/=?^_`{|}~-]+(\.[\p{L}\p{N}!#$%&'*+/=?^_`{|}~-]+)*$/u;
  const host = /^[\p{L}\p{N}-]+(\.[\p{L}\p{N}-]+)*$/u;
  return local.length <= 64 && atoms.test(local) && (host.test(domain) || /^\[\d{1,3}(\.\d{1,3}){3}\]$/.test(domain));
}

const USERNAME_PROHIBITED = /^[^<>&"'\s$%!#?§,;:*~/\\|^=[\]{}()`\p{Cc}]+$/u;
const PERSON_NAME_PROHIBITED = /^[^<>&"\n\v\f\r\u0085\u2028\u2029$%!#?§;*~/\\|^=[\]{}()\p{Cc}]+$/u;

/** One value against one configured validator: the failing message and its parameters, or undefined. */
function check(validator: string, config: Record<string, unknown>, value: string, emailAsUsername: boolean): unknown[] | undefined {
  switch (validator) {
    case 'length': {
      // LengthValidator: trimmed unless trim-disabled; params are min and max (null when not set).
      const min = config.min === undefined ? null : Number(config.min);
      const max = config.max === undefined ? null : Number(config.max);
      const length = (config['trim-disabled'] === true ? value : value.trim()).length;
      if ((min !== null && length < min) || (max !== null && length > max)) {
        const message =
          max === null ? 'error-invalid-length-too-short' : min === null ? 'error-invalid-length-too-long' : 'error-invalid-length';
        return [message, min, max];
      }
      return undefined;
    }
    case 'email':
      return validEmail(value) ? undefined : ['error-invalid-email', value];
    case 'username-prohibited-characters':
      return emailAsUsername || USERNAME_PROHIBITED.test(value)
        ? undefined
        : [String(config['error-message'] ?? 'error-username-invalid-character')];
    case 'person-name-prohibited-characters':
      return PERSON_NAME_PROHIBITED.test(value) ? undefined : [String(config['error-message'] ?? 'error-person-name-invalid-character')];
    case 'pattern': {
      const pattern = String(config.pattern ?? '');
      return new RegExp(pattern, 'u').test(value) ? undefined : [String(config['error-message'] ?? 'error-pattern-no-match'), pattern];
    }
    default:
      // Other validators (options, uri, integer, dates, up-username-not-idn-homograph) are not modelled.
      return undefined;
  }
}

/**
 * The user as `GET /users/{id}` and the search show it (DefaultUserProfile.toRepresentation): the root
 * fields and attributes the admin may view, empty ones left out, unmanaged attributes only when the
 * realm's policy shows them to admins; `attributes` absent when there is none. The brief form (search
 * with briefRepresentation) has no required actions, credentials or notBefore.
 */
export function userRepresentation(realm: Realm, user: KeycloakUser, brief = false): Json {
  const config = realm.userProfile;
  const rep: Json = { id: user.id };
  const attributes: Record<string, string[]> = {};
  for (const name of storedNames(user)) {
    const value = stored(user, name).filter((v) => v.trim() !== '');
    const attribute = declaration(config, name);
    const visible = attribute ? adminCanView(attribute) : unmanagedVisible(config) && !isRoot(name);
    if (!visible || value.length === 0) continue;
    if (isRoot(name)) rep[name] = value[0];
    else attributes[name] = value;
  }
  rep.emailVerified = user.emailVerified;
  if (Object.keys(attributes).length > 0) rep.attributes = attributes;
  rep.createdTimestamp = user.createdTimestamp;
  rep.enabled = user.enabled;
  if (!brief) {
    rep.totp = false;
    rep.disableableCredentialTypes = [];
    rep.requiredActions = [...user.requiredActions];
    rep.notBefore = 0;
  }
  rep.access = { view: true, manageGroupMembership: true, mapRoles: true, impersonate: true, manage: true };
  return rep;
}
