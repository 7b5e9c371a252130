/**
 * Work put off to the end of the event loop's current turn, all of it at once: after the I/O callbacks
 * that arrived together (requests, database results) have run, before the loop waits for more.
 * A server writes its sockets back to back there, as Redis writes its replies before its
 * loop sleeps, so that the peers it writes to are woken once a batch rather than once a message.
 *
 * A task that throws does not keep the others of its batch from running (a response left unwritten, a
 * socket left corked); the first error is thrown again once they have, as any exception in a callback
 * of the loop's would be. A task that puts off more work puts it off to the next turn.
 */
export function atEndOfTurn<T>(task: (value: T) => void, value: T): void {
  if (tasks.length === 0) setImmediate(runAll);
  tasks.push(task as (value: unknown) => void);
  values.push(value);
}

let tasks: ((value: unknown) => void)[] = [];
let values: unknown[] = [];

function runAll(): void {
  const batch = tasks;
  const batchValues = values;
  tasks = [];
  values = [];
  let failure: { error: unknown } | undefined;
  for (let i = 0; i < batch.length; i++) {
    try {
      (batch[i] as (value: unknown) => void)(batchValues[i]);
    } catch (error) {
      failure ??= { error };
    }
  }
  if (failure) throw failure.error;
}
