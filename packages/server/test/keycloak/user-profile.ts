import { errorMessage, isObject, type Json, Refusal } from './http.ts';

/**
 * The realm's declarative user profile (UPConfig), as `GET/PUT /admin/realms/{realm}/users/profile`
 * read and write it. Since Keycloak 24 every realm has one and it cannot be switched off ("Supported
 * user profile", Keycloak 24.0.0 release notes).
 */
export type UnmanagedAttributePolicy = 'ENABLED' | 'ADMIN_EDIT' | 'ADMIN_VIEW';

export interface UPAttribute {
  name: string;
  displayName?: string;
  validations?: Record<string, Record<string, unknown>>;
  annotations?: Record<string, unknown>;
  required?: { roles?: string[]; scopes?: string[] };
  permissions?: { view?: string[]; edit?: string[] };
  selector?: { scopes?: string[] };
  group?: string;
  multivalued?: boolean;
  defaultValue?: string;
}

export interface UPGroup {
  name?: string;
  displayHeader?: string;
  displayDescription?: string;
  annotations?: Record<string, unknown>;
}

export interface UPConfig {
  attributes: UPAttribute[];
  groups?: UPGroup[];
  /** Absent means unmanaged attributes are disabled (UPConfig.UnmanagedAttributePolicy has no DISABLED value). */
  unmanagedAttributePolicy?: UnmanagedAttributePolicy;
}

const bothRoles = { view: ['admin', 'user'], edit: ['admin', 'user'] };

/** The message-bundle reference Keycloak uses as a display name: `${name}`. */
const label = (name: string) => `\${${name}}`;

/**
 * The configuration every new realm starts with: Keycloak's
 * services/src/main/resources/org/keycloak/userprofile/config/keycloak-default-user-profile.json
 * (username, email, firstName, lastName and the `user-metadata` group), with `multivalued` spelled out
 * as UPAttribute serializes it.
 */
export function defaultUserProfile(): UPConfig {
  return {
    attributes: [
      {
        name: 'username',
        displayName: label('username'),
        validations: { length: { min: 3, max: 255 }, 'username-prohibited-characters': {}, 'up-username-not-idn-homograph': {} },
        permissions: structuredClone(bothRoles),
        multivalued: false,
      },
      {
        name: 'email',
        displayName: label('email'),
        validations: { email: {}, length: { max: 255 } },
        required: { roles: ['user'] },
        permissions: structuredClone(bothRoles),
        multivalued: false,
      },
      ...(['firstName', 'lastName'] as const).map((name) => ({
        name,
        displayName: label(name),
        validations: { length: { max: 255 }, 'person-name-prohibited-characters': {} },
        required: { roles: ['user'] },
        permissions: structuredClone(bothRoles),
        multivalued: false,
      })),
    ],
    groups: [{ name: 'user-metadata', displayHeader: 'User metadata', displayDescription: 'Attributes, which refer to user metadata' }],
  };
}

/** Validator ids the Validator SPI of Keycloak 26 knows; any other is refused in a configuration. */
const VALIDATORS = new Set([
  'double',
  'email',
  'integer',
  'iso-date',
  'length',
  'local-date',
  'multivalued',
  'options',
  'pattern',
  'person-name-prohibited-characters',
  'up-username-not-idn-homograph',
  'uri',
  'username-prohibited-characters',
]);

const POLICIES = new Set(['ENABLED', 'ADMIN_EDIT', 'ADMIN_VIEW']);
const ROLES = new Set(['admin', 'user']);
const ATTRIBUTE_NAME = /^[a-zA-Z0-9._-]+$/;

/**
 * A configuration sent to `PUT /users/profile`, checked as UPConfigUtils.validate does (the messages are
 * its own), and refused as UserProfileResource does: 400 with the list of problems in `errorMessage`
 * (ComponentValidationException carries `errors.toString()`). Throws, or answers the config to store.
 */
export function acceptProfileConfig(input: unknown): UPConfig {
  if (!isObject(input)) throw errorMessage(400, 'Invalid user profile configuration');
  const policy = input.unmanagedAttributePolicy;
  // An unknown enum value fails JSON binding of UPConfig before any validation: a 400 from
  // KeycloakErrorHandler (JsonProcessingException), whose exact body the double does not reproduce.
  if (policy !== undefined && policy !== null && !(typeof policy === 'string' && POLICIES.has(policy)))
    throw new Refusal(400, { error: 'unknown_error', error_description: 'Cannot parse the JSON' });
  const attributes = Array.isArray(input.attributes) ? (input.attributes as Json[]) : undefined;
  const groups = Array.isArray(input.groups) ? (input.groups as UPGroup[]) : [];
  const errors: string[] = [];
  const seen = new Set<string>();
  const groupNames = new Set(groups.map((g) => g.name));
  for (const attribute of attributes ?? []) {
    const name = typeof attribute.name === 'string' ? attribute.name : '';
    if (name.trim() === '') errors.push("Attribute configuration without 'name' is not allowed");
    else if (seen.has(name)) errors.push(`Attribute configuration already exists with 'name':'${name}'`);
    else {
      seen.add(name);
      if (!ATTRIBUTE_NAME.test(name))
        errors.push(`Invalid attribute name (only letters, numbers and '.' '_' '-' special characters allowed): ${name}'`);
    }
    for (const validator of Object.keys(isObject(attribute.validations) ? attribute.validations : {}))
      if (!VALIDATORS.has(validator)) errors.push(`Validator '${validator}' defined for attribute '${name}' doesn't exist`);
    const permissions = isObject(attribute.permissions) ? attribute.permissions : {};
    for (const field of ['view', 'edit'] as const)
      for (const role of Array.isArray(permissions[field]) ? (permissions[field] as string[]) : [])
        if (!ROLES.has(role))
          errors.push(`'permissions.${field}' configuration for attribute '${name}' contains unsupported role '${role}'`);
    const required = isObject(attribute.required) ? attribute.required : {};
    for (const role of Array.isArray(required.roles) ? (required.roles as string[]) : [])
      if (!ROLES.has(role)) errors.push(`'required.roles' configuration for attribute '${name}' contains unsupported role '${role}'`);
    if (typeof attribute.group === 'string' && !groupNames.has(attribute.group))
      errors.push(`Attribute '${name}' references unknown group '${attribute.group}'`);
    if (attribute.defaultValue !== undefined && ['username', 'email', 'firstName', 'lastName'].includes(name))
      errors.push(`Default value not supported for attribute '${name}'`);
  }
  if (attributes) for (const root of ['username', 'email']) if (!seen.has(root)) errors.push(`The attribute '${root}' can not be removed`);
  const unnamedGroups = groups.filter((g) => g.name === undefined || g.name === null).length;
  if (unnamedGroups > 0) errors.push(`Name is mandatory for groups, found ${unnamedGroups} group(s) without name.`);
  if (errors.length > 0) throw errorMessage(400, `[${errors.join(', ')}]`);
  return {
    attributes: (attributes ?? []).map((a) => ({ ...(a as unknown as UPAttribute), multivalued: a.multivalued === true })),
    groups,
    ...(policy ? { unmanagedAttributePolicy: policy as UnmanagedAttributePolicy } : {}),
  };
}

/** The attribute's declaration in the realm's user profile, or undefined when it is unmanaged. */
export function declaration(config: UPConfig, name: string): UPAttribute | undefined {
  return config.attributes.find((a) => a.name === name);
}

/** Whether the admin API (the USER_API context, an admin context) may edit a declared attribute. */
export function adminCanEdit(attribute: UPAttribute): boolean {
  return attribute.permissions?.edit?.includes('admin') === true;
}

/** Edit implies view ("view permission is implicitly granted when edit is", Server Administration Guide, permissions property). */
export function adminCanView(attribute: UPAttribute): boolean {
  return adminCanEdit(attribute) || attribute.permissions?.view?.includes('admin') === true;
}

/**
 * Whether the admin context may see and keep unmanaged attributes at all, and edit them
 * (DefaultAttributes.isAllowUnmanagedAttribute / isAllowEditUnmanagedAttribute, with the admin-context
 * branches: ADMIN_VIEW and ADMIN_EDIT count for the admin API).
 */
export function unmanagedVisible(config: UPConfig): boolean {
  return config.unmanagedAttributePolicy !== undefined;
}

export function unmanagedEditable(config: UPConfig): boolean {
  return config.unmanagedAttributePolicy === 'ENABLED' || config.unmanagedAttributePolicy === 'ADMIN_EDIT';
}
