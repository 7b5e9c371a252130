import type { Confidence, Signal, TopologyClass } from './signals.ts';

export type Verdict = 'not-needed' | 'needed' | 'ambiguous';

export interface Classification {
  class: TopologyClass | 'unknown';
  verdict: Verdict;
  confidence: Confidence;
  /** The class the evidence leans to when the verdict is ambiguous. */
  leaning?: TopologyClass;
  reasons: string[];
}

const WEIGHT: Record<Confidence, number> = { high: 3, medium: 2, low: 1 };
const RANK: Record<Confidence, number> = { low: 1, medium: 2, high: 3 };
const CLASSES: TopologyClass[] = ['A', 'B', 'C'];
const VERDICT: Record<TopologyClass, Verdict> = { A: 'needed', B: 'not-needed', C: 'not-needed' };

/** B and C both mean the feature is not needed: evidence split between them still gives a verdict. */
function notNeededOnly(classes: TopologyClass[]): boolean {
  return classes.length > 0 && classes.every((c) => c !== 'A');
}

/**
 * The verdict from the evidence, pure. Each hint weighs 3, 2 or 1 by its confidence; the
 * class with the most weight wins. A tie, or high-confidence evidence for two classes, is ambiguous (unless
 * it is between B and C, which agree that the feature is not needed). Confidence is high only when the
 * winner has high evidence and nothing points elsewhere; medium when it has high evidence against weaker
 * dissent, or medium evidence alone; anything weaker is ambiguous.
 */
export function classifyTopology(signals: Signal[]): Classification {
  const score: Record<TopologyClass, number> = { A: 0, B: 0, C: 0 };
  const strongest: Partial<Record<TopologyClass, Confidence>> = {};
  const evidence: Record<TopologyClass, string[]> = { A: [], B: [], C: [] };
  for (const s of signals) {
    if (!s.hint || !s.confidence) continue;
    score[s.hint] += WEIGHT[s.confidence];
    const current = strongest[s.hint];
    if (!current || RANK[s.confidence] > RANK[current]) strongest[s.hint] = s.confidence;
    evidence[s.hint].push(`${s.signal} (${s.confidence})`);
  }
  const present = CLASSES.filter((c) => score[c] > 0);
  const cite = (c: TopologyClass) => `class ${c}: ${evidence[c].join(', ')}`;
  if (present.length === 0)
    return {
      class: 'unknown',
      verdict: 'ambiguous',
      confidence: 'low',
      reasons: ['no signal points to a class (a cluster mid-bootstrap, or names this doctor does not look for)'],
    };

  const highs = present.filter((c) => strongest[c] === 'high');
  if (highs.length > 1) {
    if (notNeededOnly(highs))
      return {
        class: 'unknown',
        verdict: 'not-needed',
        confidence: 'medium',
        reasons: [`high-confidence evidence for both B and C, which agree the feature is not needed: ${highs.map(cite).join('; ')}`],
      };
    return {
      class: 'unknown',
      verdict: 'ambiguous',
      confidence: 'low',
      reasons: [`contradiction: high-confidence evidence for ${highs.join(' and ')}: ${highs.map(cite).join('; ')}`],
    };
  }

  const top = Math.max(...present.map((c) => score[c]));
  const leaders = present.filter((c) => score[c] === top);
  if (leaders.length > 1) {
    if (notNeededOnly(leaders))
      return {
        class: 'unknown',
        verdict: 'not-needed',
        confidence: 'medium',
        reasons: [`the evidence is split between B and C, which agree the feature is not needed: ${leaders.map(cite).join('; ')}`],
      };
    return {
      class: 'unknown',
      verdict: 'ambiguous',
      confidence: 'low',
      reasons: [`a tie between ${leaders.join(' and ')}: ${leaders.map(cite).join('; ')}`],
    };
  }

  const winner = leaders[0] as TopologyClass;
  const others = present.filter((c) => c !== winner);
  const dissent = others.length > 0 ? [`against it, ${others.map(cite).join('; ')}`] : [];
  const best = strongest[winner] as Confidence;
  let confidence: Confidence;
  if (best === 'high') confidence = others.length === 0 ? 'high' : 'medium';
  else if (best === 'medium' && others.length === 0) confidence = 'medium';
  else confidence = 'low';
  if (confidence === 'low')
    return {
      class: 'unknown',
      verdict: 'ambiguous',
      confidence,
      leaning: winner,
      reasons: [`the evidence leans to ${cite(winner)}, but too weakly to decide`, ...dissent],
    };
  return { class: winner, verdict: VERDICT[winner], confidence, reasons: [cite(winner), ...dissent] };
}
