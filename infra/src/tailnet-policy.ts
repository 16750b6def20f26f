/** The tailnet ACL policy (Tailscale policy file, JSON form) the streaming fleet relies on. */

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
export function streamingDestinations(
  tag: string,
  args: Pick<TailnetPolicyArgs, "tcpPorts" | "udpPortRange">,
) {
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
export function accountRules(accountTag: string, args: Pick<TailnetPolicyArgs, "tcpPorts" | "udpPortRange">) {
  const dst = streamingDestinations(accountTag, args);
  return [
    { action: "accept" as const, src: [accountTag], dst: dst.tcp, proto: "tcp" },
    { action: "accept" as const, src: [accountTag], dst: dst.udp, proto: "udp" },
  ];
}
