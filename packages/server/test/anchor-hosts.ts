import { execFile } from 'node:child_process';
import { chmod, mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { tempDir } from './bootstrap-clusters.ts';
import type { KubeObject, PodOutcome, PodRunner } from './kube-api/index.ts';

/**
 * Fake nodes for the anchor Jobs: each node is a directory holding its host paths (/etc/systemd/system,
 * /etc/tenantry) and its interfaces (net/<iface>/addrs). The runner executes a pod's real `sh -c` script
 * with a fake `ip` (reading and writing those files) and a `sleep` that returns at once, after mapping the
 * pod's hostPath mounts onto the node's directory, so the scripts the Jobs carry are what is tested.
 */
const FAKE_IP = `#!/bin/sh
set -eu
net="$FAKE_NET"
while [ $# -gt 0 ]; do case "$1" in -o|-4|-6|-br) shift ;; *) break ;; esac; done
obj="$1"; shift
case "$obj" in
  link)
    [ "$1" = show ] || exit 2
    if [ "$2" = dev ]; then iface="$3"; else iface="$2"; fi
    if [ -f "$net/$iface.appears-after" ]; then
      n=$(cat "$net/$iface.appears-after")
      if [ "$n" -gt 0 ]; then echo $((n - 1)) > "$net/$iface.appears-after"; echo "Device \\"$iface\\" does not exist." >&2; exit 1; fi
      rm -f "$net/$iface.appears-after"; mkdir -p "$net/$iface"
    fi
    [ -d "$net/$iface" ] || { echo "Device \\"$iface\\" does not exist." >&2; exit 1; }
    echo "7: $iface: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP"
    ;;
  addr)
    cmd="$1"; shift
    case "$cmd" in
      show)
        iface="$2"
        [ -d "$net/$iface" ] || { echo "Device \\"$iface\\" does not exist." >&2; exit 1; }
        touch "$net/$iface/addrs"
        while read -r a; do [ -n "$a" ] && echo "7: $iface    inet $a scope global $iface\\\\       valid_lft forever preferred_lft forever"; done < "$net/$iface/addrs"
        ;;
      add)
        a="$1"; iface="$3"
        if grep -qx "$a" "$net/$iface/addrs" 2>/dev/null; then echo "RTNETLINK answers: File exists" >&2; exit 2; fi
        echo "$a" >> "$net/$iface/addrs"
        ;;
      del)
        a="$1"; iface="$3"
        grep -vx "$a" "$net/$iface/addrs" > "$net/$iface/addrs.new" || true
        mv "$net/$iface/addrs.new" "$net/$iface/addrs"
        ;;
      *) exit 2 ;;
    esac
    ;;
  *) exit 2 ;;
esac
`;

type Obj = Record<string, unknown>;

export class FakeHosts {
  readonly root: string;
  readonly bin: string;
  /** Pods it ran: node and the script's first line, in order. */
  readonly runs: Array<{ node: string; pod: string }> = [];
  /** Nodes whose pods never start (an image that cannot be pulled). */
  readonly stuck = new Map<string, string>();

  private constructor(root: string) {
    this.root = root;
    this.bin = join(root, 'bin');
  }

  static async create(): Promise<FakeHosts> {
    const hosts = new FakeHosts(await tempDir('anchor-hosts'));
    await mkdir(hosts.bin, { recursive: true });
    await writeFile(join(hosts.bin, 'ip'), FAKE_IP);
    await writeFile(join(hosts.bin, 'sleep'), '#!/bin/sh\nexit 0\n');
    await chmod(join(hosts.bin, 'ip'), 0o755);
    await chmod(join(hosts.bin, 'sleep'), 0o755);
    return hosts;
  }

  /** A node's root directory, with /etc/systemd/system/multi-user.target.wants as every systemd host has. */
  async node(name: string): Promise<string> {
    const root = join(this.root, 'nodes', name);
    await mkdir(join(root, 'etc/systemd/system/multi-user.target.wants'), { recursive: true });
    await mkdir(join(root, 'net'), { recursive: true });
    return root;
  }

  /** Creates the bridge now (with addresses), or after the script has looked for it `appearsAfter` times. */
  async bridge(node: string, iface: string, options: { addresses?: string[]; appearsAfter?: number } = {}): Promise<void> {
    const net = join(await this.node(node), 'net');
    if (options.appearsAfter !== undefined) {
      await writeFile(join(net, `${iface}.appears-after`), String(options.appearsAfter));
      return;
    }
    await mkdir(join(net, iface), { recursive: true });
    await writeFile(join(net, iface, 'addrs'), (options.addresses ?? []).map((a) => `${a}\n`).join(''));
  }

  async addresses(node: string, iface: string): Promise<string[]> {
    const text = await readFile(join(this.root, 'nodes', node, 'net', iface, 'addrs'), 'utf8').catch(() => '');
    return text.split('\n').filter((l) => l !== '');
  }

  async setAddresses(node: string, iface: string, addresses: string[]): Promise<void> {
    await writeFile(join(this.root, 'nodes', node, 'net', iface, 'addrs'), addresses.map((a) => `${a}\n`).join(''));
  }

  /** Reads a file on a node by its host path, or undefined. */
  file(node: string, hostPath: string): Promise<string | undefined> {
    return readFile(join(this.root, 'nodes', node, hostPath), 'utf8').catch(() => undefined);
  }

  async remove(node: string, hostPath: string): Promise<void> {
    await rm(join(this.root, 'nodes', node, hostPath), { force: true, recursive: true });
  }

  /** The kubelet of these nodes, for `kube.runJobs`. */
  runner(): PodRunner {
    return (pod) => this.#run(pod);
  }

  async #run(pod: KubeObject): Promise<PodOutcome> {
    const spec = pod.spec as Obj;
    const node = String(spec.nodeName ?? '');
    this.runs.push({ node, pod: pod.metadata.name ?? '' });
    const stuck = this.stuck.get(node);
    if (stuck) return { waiting: stuck, message: 'Back-off pulling image' };
    const root = await this.node(node);
    const container = ((spec.containers as Obj[]) ?? [])[0] ?? {};
    const [shell, flag, script] = (container.command as string[]) ?? [];
    if (shell !== 'sh' || flag !== '-c' || !script) return { exitCode: 127, message: 'the fake kubelet runs `sh -c <script>` only' };
    const volumes = new Map(
      ((spec.volumes as Obj[]) ?? []).map((v) => [String(v.name), (v.hostPath ?? {}) as { path?: string; type?: string }]),
    );
    const mounts: Array<[string, string]> = [];
    for (const mount of (container.volumeMounts as Obj[]) ?? []) {
      const hostPath = volumes.get(String(mount.name));
      if (!hostPath?.path) continue;
      const onNode = join(root, hostPath.path);
      if (hostPath.type === 'DirectoryOrCreate') await mkdir(onNode, { recursive: true });
      else if (
        hostPath.type === 'Directory' &&
        !(await stat(onNode).then(
          (s) => s.isDirectory(),
          () => false,
        ))
      )
        return { waiting: 'ContainerCreating', message: `hostPath type check failed: ${hostPath.path} is not a directory` };
      mounts.push([String(mount.mountPath), onNode]);
    }
    const env: Record<string, string> = {};
    for (const variable of (container.env as Array<{ name: string; value?: string }>) ?? []) {
      let value = variable.value ?? '';
      for (const [mountPath, onNode] of mounts)
        if (value === mountPath || value.startsWith(`${mountPath}/`)) value = onNode + value.slice(mountPath.length);
      env[variable.name] = value;
    }
    const messageFile = join(root, `termination-log-${pod.metadata.name}`);
    const result = await new Promise<{ code: number; output: string }>((resolve) => {
      execFile(
        'sh',
        ['-c', script],
        {
          env: { ...env, PATH: `${this.bin}:${process.env.PATH ?? ''}`, FAKE_NET: join(root, 'net'), MESSAGE_FILE: messageFile },
          timeout: 20_000,
        },
        (error, stdout, stderr) =>
          resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, output: `${stdout}${stderr}` }),
      );
    });
    const message = (await readFile(messageFile, 'utf8').catch(() => '')).trim();
    // FallbackToLogsOnError: an empty message of a failed container is the end of its log.
    return { exitCode: result.code, message: message || (result.code !== 0 ? result.output.trim().split('\n').slice(-5).join('\n') : '') };
  }
}
