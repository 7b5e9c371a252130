import type { Generated, Selectable } from 'kysely';

export type PartnerStatus = 'active' | 'suspended';

export interface PartnersTable {
  id: string;
  /** The Kube-DC Partner resource (`<namespace>/<name>`) whose spec manages this partner, or null. */
  managed_by: string | null;
  display_name: string;
  status: PartnerStatus;
  scopes: string[];
  max_customers: number;
  max_projects_per_customer: number;
  max_open_operations: number;
  usage_window_days: number;
  rate_limit_per_minute: number;
  rate_limit_burst: number;
  allow_private_webhooks: boolean;
  default_plan_id: string;
  grace_days: number;
  /** Kube-DC's customer id prefix: the partner's customers are `<prefix>-<customer id>` on the platform. */
  customer_prefix: string;
  /** The partner's own portal (Kube-DC's Partner `portalUrl`): the console links its customers there. */
  portal_url: string | null;
  /** Who to write to about the partner (Kube-DC's Partner `contactEmail`): the operator's record. */
  contact_email: string | null;
  /** A new customer's first project when the create names none (Kube-DC's Partner `defaults.projectName`). */
  default_project: Generated<string>;
  /** Live customers; test-mode customers are counted apart (CONTRACT §5: never mixed). */
  customer_count: Generated<number>;
  test_customer_count: Generated<number>;
  /** How far the partner's test clock runs ahead of the server's (CONTRACT §5, clock/advance). */
  test_clock_offset_ms: Generated<number>;
  ready_at: Date;
  suspended_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

/** The tables this module owns, as the composition root merges them into the database type. */
export interface PartnerTables {
  partners: PartnersTable;
}

/** A row of `partners` as a query answers it. */
export type PartnerRow = Selectable<PartnersTable>;
