import { StateMachine } from '../infra/state-machine.ts';
import type { ProjectState } from './tables.ts';

/** CONTRACT §6, project state: `provisioning → ready | failed`; `ready | failed → deleting → gone`. */
export const PROJECT_STATE = new StateMachine<ProjectState>('project state', {
  provisioning: ['ready', 'failed'],
  ready: ['deleting'],
  failed: ['deleting'],
  deleting: [],
});
