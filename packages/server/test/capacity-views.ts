/** The capacity API's answers as the capacity tests read them, and an amount of resources to ask for. */

export interface Amount {
  vcpu: number;
  memory_gib: number;
  storage_gib: number;
  gpus: Record<string, number>;
}
export interface Quota {
  customer_id: string;
  revision: number;
  quota: Amount;
  project_caps: Record<string, Partial<Amount>>;
}
interface Dimension {
  total: number;
  allocated: number;
  available: number;
}
export interface CapacityView {
  pool: { vcpu: Dimension; memory_gib: Dimension; storage_gib: Dimension; gpus: Record<string, Dimension> };
  per_customer_max: Amount;
  gpu_profiles: { name: string; display_name: string; memory_gib: number }[];
}

export const amount = (vcpu: number, memory_gib: number, storage_gib: number, gpus: Record<string, number> = {}): Amount => ({
  vcpu,
  memory_gib,
  storage_gib,
  gpus,
});
