import type { HeldResources } from '../platform/platform.ts';
import type { ConsoleSession } from './service.ts';
import type { FormErrors, VmAction, VmRequest, VmView } from './vms.ts';

/** What the console page shows: its own file, as both the page and its VM sections read it. */
export interface ConsolePageView {
  session: ConsoleSession;
  vms: VmView[];
  /** What the customer's workloads hold against its quota now. */
  held: HeldResources;
  /** The project the form starts on (`?project=`), if it is one of the customer's. */
  project: string | null;
  /** A VM just created (`?created=`), announced once. */
  created: string | null;
  /** A VM just stopped, started or deleted, announced once. */
  changed?: { name: string; change: VmAction };
  /** Why the last request could not be done (a VM's button refused). */
  alert?: string;
  /** The posted form, shown again with its problems. */
  form?: { values: Partial<VmRequest>; errors: FormErrors };
}
