import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { describe, test } from 'node:test';
import { parse } from 'yaml';
import { tempDir, writeTemp } from '../../test/bootstrap-clusters.ts';
import { CHART_DEFAULTS, loadChartValues, ValuesError, valuesFromTree } from './chart-values.ts';

const CHART_VALUES = new URL('../../../../charts/tenantry/values.yaml', import.meta.url);

describe('chart values', () => {
  test("the defaults are the chart's own values.yaml", async () => {
    const chart = parse(await readFile(CHART_VALUES, 'utf8')) as Record<string, unknown>;
    const { sources: _s, ...fromChart } = valuesFromTree(chart, []);
    assert.deepEqual(fromChart, CHART_DEFAULTS);
  });

  test('several files merge as helm merges them: later files win, maps merge, lists are replaced', async () => {
    const dir = await tempDir('values');
    const base = await writeTemp(
      dir,
      'base.yaml',
      'platform:\n  hostnames:\n    login: login.example.com\n    extra: [a.example.com]\nplatformEndpoints:\n  kubeAPI:\n    enabled: true\n',
    );
    const over = await writeTemp(
      dir,
      'over.yaml',
      'platform:\n  hostnames:\n    extra: [b.example.com]\nplatformEndpoints:\n  kubeAPI:\n    vip: 100.65.0.30\n',
    );
    const values = await loadChartValues([base, over]);
    assert.equal(values.hostnames.login, 'login.example.com');
    assert.deepEqual(values.hostnames.extra, ['b.example.com']);
    assert.equal(values.kubeAPI.enabled, true);
    assert.equal(values.kubeAPI.vip, '100.65.0.30');
    assert.equal(values.edgeGateway.namespace, 'envoy-gateway-system');
  });

  test('a field of the wrong type or an unreadable file is refused with its name', async () => {
    assert.throws(
      () => valuesFromTree({ platformEndpoints: { kubeAPI: { enabled: 'yes' } } }, []),
      new ValuesError('platformEndpoints.kubeAPI.enabled must be true or false, got "yes"'),
    );
    assert.throws(
      () => valuesFromTree({ platform: { hostnames: { extra: 'x.example.com' } } }, []),
      /platform\.hostnames\.extra must be a list of hostnames/,
    );
    await assert.rejects(loadChartValues(['/nonexistent/values.yaml']), /cannot read the values file \/nonexistent\/values\.yaml/);
    const dir = await tempDir('values');
    await assert.rejects(loadChartValues([await writeTemp(dir, 'bad.yaml', 'a: [\n')]), /is not YAML/);
  });
});
