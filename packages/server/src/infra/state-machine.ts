/**
 * An explicit state machine: its states and, for each, the states it may move to. A status column
 * changes only through `move`, which refuses a move the table does not list; each machine is
 * tested over every pair of states, so the table is the whole truth about what can happen.
 */
export class StateMachine<S extends string> {
  readonly name: string;
  readonly moves: Readonly<Record<S, readonly S[]>>;

  constructor(name: string, moves: Record<S, readonly S[]>) {
    this.name = name;
    this.moves = moves;
  }

  get states(): S[] {
    return Object.keys(this.moves) as S[];
  }

  can(from: S, to: S): boolean {
    return this.moves[from]?.includes(to) ?? false;
  }

  /** The new state, or an IllegalTransition (a programming error: callers check what they may do first). */
  move(from: S, to: S): S {
    if (!this.can(from, to)) throw new IllegalTransition(this.name, from, to);
    return to;
  }
}

export class IllegalTransition extends Error {
  override name = 'IllegalTransition';

  constructor(machine: string, from: string, to: string) {
    super(`${machine}: ${from} → ${to} is not a legal move`);
  }
}
