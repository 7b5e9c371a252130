#!/usr/bin/env node
// The installed `tenantry` command: Node 24 runs the TypeScript sources directly (type stripping).
import '../src/cli/main.ts';
