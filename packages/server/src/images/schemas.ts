import { Type } from 'typebox';
import { OPTIONAL_FIELDS, REQUIRED_FIELDS } from './fields.ts';

/** One entry of `GET /api/create-vm/{namespace}/os-images`: the seed's fields, all strings, nothing else. */
export const OsImageSchema = Type.Object(
  {
    ...Object.fromEntries(REQUIRED_FIELDS.map((field) => [field, Type.String()])),
    ...Object.fromEntries(OPTIONAL_FIELDS.map((field) => [field, Type.Optional(Type.String())])),
  },
  { additionalProperties: false, title: 'OsImage' },
);

export const OsImagesParams = Type.Object({ namespace: Type.String() }, { additionalProperties: false });
