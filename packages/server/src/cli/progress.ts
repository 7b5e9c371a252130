/** Progress for long CLI work, on stderr and only for a terminal, so stdout stays clean for scripts. */
const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

export function spinner(label: string): { update(text: string): void; stop(): void } {
  const tty = process.stderr.isTTY === true;
  let frame = 0;
  let text = label;
  const timer = tty
    ? setInterval(() => {
        process.stderr.write(`\r${FRAMES[frame++ % FRAMES.length]} ${text}\u001b[K`);
      }, 80)
    : undefined;
  return {
    update: (next) => {
      text = next;
    },
    stop: () => {
      if (timer) {
        clearInterval(timer);
        process.stderr.write('\r\u001b[K');
      }
    },
  };
}

/** Polls `check` until it returns a value, showing a spinner with the elapsed time. */
export async function wait<T>(label: string, check: () => Promise<T | undefined>, timeoutMs = 120_000): Promise<T> {
  const started = Date.now();
  const spin = spinner(label);
  try {
    for (;;) {
      const value = await check();
      if (value !== undefined) return value;
      if (Date.now() - started > timeoutMs) throw new Error(`${label}: still not done after ${timeoutMs / 1000}s`);
      spin.update(`${label} (${Math.round((Date.now() - started) / 1000)}s)`);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  } finally {
    spin.stop();
  }
}

/** Walks a paginated operator list to its end (or `max` items), counting on a spinner. */
export async function fetchAll<T>(
  label: string,
  page: (cursor: string | undefined) => Promise<{ data: T[]; pagination: { next_cursor: string | null } }>,
  max = Number.POSITIVE_INFINITY,
): Promise<T[]> {
  const spin = spinner(`fetching ${label}`);
  const all: T[] = [];
  try {
    let cursor: string | undefined;
    do {
      const result = await page(cursor);
      all.push(...result.data);
      spin.update(`fetching ${label}: ${all.length}`);
      cursor = result.pagination.next_cursor ?? undefined;
    } while (cursor && all.length < max);
  } finally {
    spin.stop();
  }
  return all.slice(0, max);
}
