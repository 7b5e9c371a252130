/**
 * The server's architecture, checked in CI (`npm run check:architecture`): who may import whom.
 * Paths are relative to the repository root, where the check runs.
 */
const SRC = '^packages/server/src/';
/** The domain modules: each owns its tables, its store and its service. */
const MODULES = '(audit|auth|capacity|console|customers|events|images|operations|partners|projects|test-mode|usage|users|webhooks)';
/** A module's folder: a top-level one, or one under infra/ or platform/ (a driver). */
const MODULE_FOLDER = `${SRC}((?:infra|platform)/[^/]+|[^/]+)/`;
const TESTS = ['\\.test\\.ts$', '^packages/server/test/'];

module.exports = {
  forbidden: [
    {
      name: 'store-outside-its-module',
      comment: "A store is its module's SQL: another module asks the owner's service, which takes the caller's transaction.",
      severity: 'error',
      from: { path: MODULE_FOLDER, pathNot: TESTS },
      to: { path: `${SRC}.+store\\.ts$`, pathNot: `${SRC}$1/` },
    },
    {
      name: 'module-imports-app',
      comment: 'app/ is the composition root: it imports the modules, never the reverse (the front ends, cli/ and operator/, start it).',
      severity: 'error',
      from: { path: SRC, pathNot: [`${SRC}(app|cli|operator)/`, ...TESTS] },
      to: { path: `${SRC}app/` },
    },
    {
      name: 'module-imports-cli-or-operator',
      comment: 'cli/ and operator/ are front ends over the modules; a module knows neither.',
      severity: 'error',
      from: { path: `${SRC}${MODULES}/`, pathNot: [...TESTS] },
      to: { path: `${SRC}(cli|operator)/` },
    },
    {
      name: 'platform-imports-module',
      comment: 'The platform drivers know the platform contract, not the modules that use it.',
      severity: 'error',
      from: { path: `${SRC}platform/`, pathNot: [...TESTS] },
      to: { path: `${SRC}${MODULES}/` },
    },
    {
      name: 'config-imports-driver',
      comment: "Configuration is read once for every driver; a driver's own settings are the driver's.",
      severity: 'error',
      from: { path: `${SRC}config/`, pathNot: [...TESTS] },
      to: { path: `${SRC}platform/[^/]+/` },
    },
    {
      name: 'folder-cycle',
      comment: 'Folders depend one way: a cycle between two means neither can change alone.',
      severity: 'error',
      scope: 'folder',
      from: { path: SRC },
      to: { circular: true },
    },
    {
      name: 'file-cycle',
      comment: 'A cycle between files makes the load order matter.',
      severity: 'error',
      from: { path: SRC },
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // Tests set up and inspect state across modules on purpose: the rules are about the server's own code.
    exclude: { path: ['node_modules', ...TESTS] },
    // `import type` counts: a module typed on another's tables depends on it as much as one calling it.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'packages/server/tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js'] },
  },
};
