import { createHash } from "node:crypto";

/**
 * The private network's access policies. Neither grows with the number of accounts: the Headscale policy is two
 * rules whatever the number of accounts (each account is its own Headscale user, and `autogroup:self` lets a
 * user's devices reach only that user's devices), and the hosted-Tailscale policy is a fixed pool of slot tags
 * sized for the fleet's peak of concurrent accounts. Infra writes either once; the sessions service never edits it.
 */

/** Streaming ports players connect to (Sunshine/Moonlight), the defaults of infra and the sessions service. */
export const STREAMING_TCP_PORTS = [47984, 47989, 48010];
export const STREAMING_UDP_PORT_RANGE = { from: 47998, to: 48010 };

export interface StreamingPorts {
  tcpPorts: number[];
  udpPortRange: { from: number; to: number };
}

const digest = (accountId: string) => createHash("sha256").update(accountId).digest("hex").slice(0, 16);

/** The account's name on the private network (its Headscale user): a digest, so the control plane never learns ids. */
export function accountNetworkName(accountId: string): string {
  return `cgs-${digest(accountId)}`;
}

/** Prefix of the per-account tag the private-network simulator marks an account's hosts with. */
export const ACCOUNT_TAG_PREFIX = "tag:cgs-acct-";

/** The per-account tag the private-network simulator (and the cloud simulator's hosts) carry. */
export function accountNetworkTag(accountId: string): string {
  return `${ACCOUNT_TAG_PREFIX}${digest(accountId)}`;
}

export interface TailnetAclRule {
  action: "accept";
  src: string[];
  dst: string[];
  proto?: string;
}

/** Destination entries for a target on the streaming ports (TCP and UDP). */
export function streamingDestinations(target: string, ports: StreamingPorts) {
  return {
    tcp: [`${target}:${ports.tcpPorts.join(",")}`],
    udp: [`${target}:${ports.udpPortRange.from}-${ports.udpPortRange.to}`],
  };
}

function streamingRules(src: string, dst: string, ports: StreamingPorts): TailnetAclRule[] {
  const to = streamingDestinations(dst, ports);
  return [
    { action: "accept", src: [src], dst: to.tcp, proto: "tcp" },
    { action: "accept", src: [src], dst: to.udp, proto: "udp" },
  ];
}

// ---------------------------------------------------------------- Headscale (self-hosted)

/** Headscale's policy file (HuJSON; Headscale refuses fields it does not know, so it carries no `tests`). */
export interface HeadscalePolicy {
  acls: TailnetAclRule[];
}

/**
 * Every account is one Headscale user owning its player devices and its streaming hosts (untagged nodes), and
 * `autogroup:self` admits only the same user's devices: a device reaches its own account's host on the streaming
 * ports and nothing else, whatever the number of accounts. The limit, stated in the sessions README: Headscale
 * cannot tell a user's host from the same user's other devices, so the rule is symmetric and a host may open the
 * streaming ports of its own account's other devices (never another port, never another account's device).
 */
export function headscalePolicy(ports: StreamingPorts): HeadscalePolicy {
  return { acls: streamingRules("autogroup:member", "autogroup:self", ports) };
}

// ---------------------------------------------------------------- Tailscale (hosted)

/** Prefix of the slot tags; slot i is `${SLOT_TAG_PREFIX}${i}`. */
export const SLOT_TAG_PREFIX = "tag:cgs-slot-";

export function slotTag(slot: number): string {
  return `${SLOT_TAG_PREFIX}${slot}`;
}

export interface TailnetPolicyArgs extends StreamingPorts {
  /** Tag the sessions service's API key (OAuth client) owns; it owns every tag below. */
  sessionsTag: string;
  /** Tag every player device joins with (VPN_KEY_TAGS of the sessions service). */
  clientTag: string;
  /** Tag every streaming host joins with. */
  hostTag: string;
  /** Size of the slot pool (TAILSCALE_SLOTS of the sessions service): the most accounts playing at once. */
  slots: number;
}

/** The tailnet policy file (JSON form). */
export interface TailnetPolicy {
  tagOwners: Record<string, string[]>;
  acls: TailnetAclRule[];
  tests: Array<{ src: string; accept?: string[]; deny?: string[] }>;
}

/**
 * Hosted Tailscale has no user per account (users come from the identity provider and are billed per seat), no
 * wildcard tags and no `autogroup:self` for tags. So the sessions service leases each playing account one slot
 * tag from a fixed pool; slot i's devices reach slot i's hosts on the streaming ports, nothing else. The client and
 * host tags alone reach nothing (default deny). Tailscale checks `tests` whenever the policy is saved.
 */
export function tailnetPolicy(args: TailnetPolicyArgs): TailnetPolicy {
  if (!Number.isInteger(args.slots) || args.slots < 2)
    throw new Error("a tailnet policy needs at least 2 slots");
  const slots = Array.from({ length: args.slots }, (_, i) => slotTag(i));
  const [first, second] = [slots[0]!, slots[1]!];
  const port = args.tcpPorts[0]!;
  return {
    tagOwners: Object.fromEntries([
      [args.sessionsTag, []],
      [args.clientTag, [args.sessionsTag]],
      [args.hostTag, [args.sessionsTag]],
      ...slots.map((t) => [t, [args.sessionsTag]]),
    ]),
    acls: slots.flatMap((t) => streamingRules(t, t, args)),
    tests: [
      { src: first, accept: [`${first}:${port}`], deny: [`${second}:${port}`, `${first}:22`] },
      { src: args.clientTag, deny: [`${args.hostTag}:${port}`, `${first}:${port}`] },
    ],
  };
}
