import type { ClusterConfig } from '../cluster-config.ts';
import type { NetworkFacts } from '../network.ts';
import type { ResolvedAnchor, Violation } from './validate.ts';

/** What the anchor commands read before they act: the configuration, the cluster's network and each anchor's rules checked. */
export interface AnchorPlan {
  config: ClusterConfig;
  network: NetworkFacts;
  iface: string;
  anchors: ResolvedAnchor[];
  violations: Violation[];
}
