import type { ConsoleSession } from './service.ts';
import type { FormErrors, VmRequest, VmView } from './vms.ts';

/** What the console page shows: its own file, as both the page and its VM sections read it. */
export interface ConsolePageView {
  session: ConsoleSession;
  vms: VmView[];
  /** The project the form starts on (`?project=`), if it is one of the customer's. */
  project: string | null;
  /** A VM just created (`?created=`), announced once. */
  created: string | null;
  /** The posted form, shown again with its problems. */
  form?: { values: Partial<VmRequest>; errors: FormErrors };
}
