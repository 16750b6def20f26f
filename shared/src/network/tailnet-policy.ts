import { createHash } from "node:crypto";

/**
 * The tailnet ACL policy (Tailscale policy file, JSON form) the streaming fleet relies on. One implementation:
 * infra generates the base policy from it, and the sessions service adds each account's rules at runtime with it
 * (Tailscale has no wildcard tags, so every account tag needs its own tagOwners entry and rules).
 */

/** Prefix of the per-account tag every key and host of that account carries; the ACL lets a tag reach only itself. */
export const ACCOUNT_TAG_PREFIX = "tag:cgs-acct-";

/** The account's private-network tag: a digest, so the tailnet never learns account ids. */
export function accountNetworkTag(accountId: string): string {
  return `${ACCOUNT_TAG_PREFIX}${createHash("sha256").update(accountId).digest("hex").slice(0, 16)}`;
}

/** Streaming ports players connect to (Sunshine/Moonlight), the defaults of infra and the sessions service. */
export const STREAMING_TCP_PORTS = [47984, 47989, 48010];
export const STREAMING_UDP_PORT_RANGE = { from: 47998, to: 48010 };

export interface TailnetPolicyArgs {
  /** Tag the sessions service's API key owns and stamps on every key it mints. */
  sessionsTag: string;
  /** Tag every player device joins with (VPN_KEY_TAGS of the sessions service). */
  clientTag: string;
  /** Tag every streaming host joins with. */
  hostTag: string;
  /** Per-account tag prefix the sessions service adds to each key and host (ACCOUNT_TAG_PREFIX). */
  accountTagPrefix: string;
  tcpPorts: number[];
  udpPortRange: { from: number; to: number };
}

export type StreamingPorts = Pick<TailnetPolicyArgs, "tcpPorts" | "udpPortRange">;

export interface TailnetAclRule {
  action: "accept";
  src: string[];
  dst: string[];
  proto?: string;
}

export interface TailnetPolicy {
  tagOwners: Record<string, string[]>;
  acls: TailnetAclRule[];
  tests: Array<{ src: string; accept?: string[]; deny?: string[] }>;
}

/** Destination entries for a tag on the streaming ports (TCP and UDP). */
export function streamingDestinations(tag: string, args: StreamingPorts) {
  return {
    tcp: args.tcpPorts.map((p) => `${tag}:${p}`),
    udp: [`${tag}:${args.udpPortRange.from}-${args.udpPortRange.to}`],
  };
}

/**
 * Default deny: no rule lets the client tag (shared by every player) reach any host. A device reaches a host
 * only through its account's own tag, on the streaming ports: the rules for an account tag are
 * accountRules(tag), and the tests below are checked by Tailscale whenever the policy is saved.
 */
export function tailnetPolicy(args: TailnetPolicyArgs, accountTags: string[] = []): TailnetPolicy {
  const exampleA = `${args.accountTagPrefix}0000000000000000`;
  const exampleB = `${args.accountTagPrefix}ffffffffffffffff`;
  const tags = [...new Set([exampleA, exampleB, ...accountTags])];
  const portsOf = (tag: string) => streamingDestinations(tag, args);
  return {
    tagOwners: Object.fromEntries([
      [args.sessionsTag, []],
      [args.clientTag, [args.sessionsTag]],
      [args.hostTag, [args.sessionsTag]],
      ...tags.map((t) => [t, [args.sessionsTag]]),
    ]),
    acls: tags.flatMap((t) => accountRules(t, args)),
    tests: [
      { src: exampleA, accept: [portsOf(exampleA).tcp[0]!], deny: [portsOf(exampleB).tcp[0]!] },
      { src: args.clientTag, deny: [`${args.hostTag}:${args.tcpPorts[0]}`, portsOf(exampleA).tcp[0]!] },
    ],
  };
}

/** The two rules of one account: its devices reach its hosts on the streaming ports, nothing else. */
export function accountRules(accountTag: string, args: StreamingPorts): TailnetAclRule[] {
  const dst = streamingDestinations(accountTag, args);
  return [
    { action: "accept", src: [accountTag], dst: dst.tcp, proto: "tcp" },
    { action: "accept", src: [accountTag], dst: dst.udp, proto: "udp" },
  ];
}

/**
 * A tailnet's policy with one account's tag owned by `ownerTag` and its rules present; `changed` is false when
 * both were already there (other entries are kept as they are).
 */
export function withAccountRules(
  policy: Partial<TailnetPolicy> & Record<string, unknown>,
  accountTag: string,
  ownerTag: string,
  ports: StreamingPorts,
): { policy: Partial<TailnetPolicy> & Record<string, unknown>; changed: boolean } {
  const tagOwners = { ...(policy.tagOwners ?? {}) };
  const acls = [...(policy.acls ?? [])];
  let changed = false;
  if (!(tagOwners[accountTag] ?? []).includes(ownerTag)) {
    tagOwners[accountTag] = [...(tagOwners[accountTag] ?? []), ownerTag];
    changed = true;
  }
  const same = (a: TailnetAclRule, b: TailnetAclRule) =>
    a.action === b.action &&
    a.proto === b.proto &&
    a.src.length === b.src.length &&
    a.src.every((s, i) => s === b.src[i]) &&
    a.dst.length === b.dst.length &&
    a.dst.every((d, i) => d === b.dst[i]);
  for (const rule of accountRules(accountTag, ports)) {
    if (!acls.some((r) => same(r, rule))) {
      acls.push(rule);
      changed = true;
    }
  }
  return { policy: { ...policy, tagOwners, acls }, changed };
}
