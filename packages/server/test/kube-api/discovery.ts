import { statusBody } from './errors.ts';
import { acceptsJson, openApiV2, openApiV3, openApiV3Discovery } from './openapi.ts';
import { apiVersionOf, type ResourceRegistry } from './registry.ts';

/** The discovery documents clients read before they talk to a group (kubectl, client-node's generic API). */
export function discovery(registry: ResourceRegistry, segments: string[]): Record<string, unknown> | undefined {
  const [root, a, b] = segments;
  if (root === 'version' && segments.length === 1)
    return { major: '1', minor: '33', gitVersion: 'v1.33.0-tenantry-test-double', platform: 'linux/amd64' };
  if (root === 'api' && segments.length === 1)
    return { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress: '127.0.0.1' }] };
  if (root === 'apis' && segments.length === 1) {
    const groups = new Map<string, string[]>();
    for (const { group, version } of registry.groupVersions()) {
      if (group === '') continue;
      groups.set(group, [...(groups.get(group) ?? []), version]);
    }
    return {
      kind: 'APIGroupList',
      apiVersion: 'v1',
      groups: [...groups].map(([name, versions]) => ({
        name,
        versions: versions.map((version) => ({ groupVersion: `${name}/${version}`, version })),
        preferredVersion: { groupVersion: `${name}/${versions[0]}`, version: versions[0] },
      })),
    };
  }
  if (root === 'apis' && segments.length === 2 && a) {
    const versions = registry.groupVersions().filter((gv) => gv.group === a);
    if (versions.length === 0) return undefined;
    return {
      kind: 'APIGroup',
      apiVersion: 'v1',
      name: a,
      versions: versions.map((gv) => ({ groupVersion: `${a}/${gv.version}`, version: gv.version })),
      preferredVersion: { groupVersion: `${a}/${versions[0]?.version}`, version: versions[0]?.version },
    };
  }
  const group = root === 'api' ? '' : root === 'apis' ? a : undefined;
  const version = root === 'api' ? a : b;
  const expected = root === 'api' ? 2 : 3;
  if (group === undefined || !version || segments.length !== expected) return undefined;
  const types = registry.all().filter((t) => t.group === group && t.version === version);
  if (types.length === 0) return undefined;
  const verbs = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'];
  const resources = types.flatMap((t) => [
    {
      name: t.plural,
      singularName: t.kind.toLowerCase(),
      namespaced: t.namespaced,
      kind: t.kind,
      verbs,
      ...(t.shortNames ? { shortNames: t.shortNames } : {}),
    },
    ...(t.statusSubresource
      ? [{ name: `${t.plural}/status`, singularName: '', namespaced: t.namespaced, kind: t.kind, verbs: ['get', 'patch', 'update'] }]
      : []),
  ]);
  return { kind: 'APIResourceList', apiVersion: 'v1', groupVersion: apiVersionOf({ group, version }), resources };
}

/** `/openapi/v2`, `/openapi/v3` and `/openapi/v3/<group-version>` (openapi.ts): a status and a body. */
export function openApi(registry: ResourceRegistry, segments: string[], accept: string | undefined): [number, unknown] {
  const [, version, root, ...rest] = segments;
  const notFound: [number, unknown] = [404, statusBody(404, 'NotFound', 'the server could not find the requested resource')];
  if (version === 'v2' && segments.length === 2) {
    if (!acceptsJson(accept))
      return [406, statusBody(406, 'NotAcceptable', 'only the following media types are accepted: application/json')];
    return [200, openApiV2(registry)];
  }
  if (version !== 'v3') return notFound;
  if (root === undefined) return [200, openApiV3Discovery(registry)];
  const [group, gv] = root === 'api' && rest.length === 1 ? ['', rest[0]] : root === 'apis' && rest.length === 2 ? [rest[0], rest[1]] : [];
  const document = group !== undefined && gv ? openApiV3(registry, group, gv) : undefined;
  return document ? [200, document] : notFound;
}
