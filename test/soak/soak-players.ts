import { execFile } from "node:child_process";
import { createHmac, randomUUID } from "node:crypto";
import { promisify } from "node:util";
import { repoRoot } from "../platform/launch-platform";
import type { SoakPlatform } from "./soak-platform";

const run = promisify(execFile);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** billing's default outside production (services/billing/src/config.ts): the local stand-in's signing secret. */
const WEBHOOK_SECRET = "whsec_local_development_secret";
const WEBHOOK_PATH = "/api/v1/billing/stripe-webhook";

/** One request a player made through the gateway: status 0 when no answer came (connection refused or reset). */
export interface RequestRecord {
  at: number;
  ms: number;
  method: string;
  route: string;
  status: number;
  player: number;
  /** The error's code and message when the answer was 5xx (what the audit shows). */
  error?: string;
}

/** A top-up the soak paid with signed webhooks, and the take-backs (refund or dispute) it then sent for it. */
export interface PaymentRecord {
  player: number;
  accountId: string;
  checkoutSessionId: string;
  paymentIntentId: string;
  amount: number;
  /** How the paying webhooks were sent: once, twice, both event types, out of order. */
  delivery: string;
  /** billing answered 200 to at least one paying event. */
  acked: boolean;
  /** The cumulative amount_refunded of every refund event billing acknowledged. */
  refundsAcked: number[];
  dispute?: { id: string; outcome: "won" | "lost"; closedAcked: boolean };
  /** The account was deleted afterwards (its wallet closed). */
  accountDeleted: boolean;
}

export interface PlayerStats {
  journeysStarted: number;
  /** start, ready, pair, connect, play, stop: all of it, ending stopped by the player. */
  journeysCompleted: number;
  /** Ended by the platform instead (an instance lost, a start that failed): the player saw why. */
  journeysEndedByFault: number;
  journeysAbandoned: number;
  /** Why the journeys that did not complete did not: "<outcome>: <state>, <stop reason or message>" -> count. */
  outcomes: Record<string, number>;
  topups: number;
  refunds: number;
  disputes: number;
  accountsDeleted: number;
}

export interface PlayersContext {
  soak: SoakPlatform;
  random: () => number;
  runId: string;
  /** Players start nothing new after this. */
  loadEndsAt: number;
  /** Retries (webhook deliveries, a stop) give up after this. */
  hardDeadline: number;
  requests: RequestRecord[];
  payments: PaymentRecord[];
  stats: PlayerStats;
  log(line: string): void;
}

export function newStats(): PlayerStats {
  return {
    journeysStarted: 0,
    journeysCompleted: 0,
    journeysEndedByFault: 0,
    journeysAbandoned: 0,
    outcomes: {},
    topups: 0,
    refunds: 0,
    disputes: 0,
    accountsDeleted: 0,
  };
}

/** A real access token from the shared Keycloak (test/platform/token.mjs finds or creates the user). */
async function mintToken(email: string): Promise<string> {
  const { stdout } = await run(process.execPath, ["test/platform/token.mjs", email], { cwd: repoRoot });
  return stdout.trim();
}

const subOf = (token: string): string =>
  (JSON.parse(Buffer.from(token.split(".")[1]!, "base64url").toString("utf8")) as { sub: string }).sub;

/** Stripe's signature scheme (t=…,v1=HMAC-SHA256 of "t.payload"), as the local checkout stand-in signs. */
function stripeSignature(payload: string): string {
  const t = Math.floor(Date.now() / 1000);
  const v1 = createHmac("sha256", WEBHOOK_SECRET).update(`${t}.${payload}`).digest("hex");
  return `t=${t},v1=${v1}`;
}

const stripeEvent = (type: string, object: Record<string, unknown>, id = `evt_soak_${randomUUID()}`) =>
  JSON.stringify({
    id,
    object: "event",
    api_version: "2025-08-27.basil",
    created: Math.floor(Date.now() / 1000),
    livemode: false,
    type,
    data: { object },
  });

type Json = Record<string, unknown>;

class Player {
  private token = "";
  private tokenAt = 0;
  accountId = "";
  private readonly email: string;

  constructor(
    private readonly ctx: PlayersContext,
    private readonly index: number,
  ) {
    this.email = `soak-${ctx.runId}-${index}@example.com`;
  }

  private async ensureToken(): Promise<void> {
    // Keycloak's access tokens live 5 min: a fresh one every 3, as a client refreshes.
    if (this.token && Date.now() - this.tokenAt < 180_000) return;
    for (;;) {
      try {
        this.token = await mintToken(this.email);
        this.tokenAt = Date.now();
        this.accountId = subOf(this.token);
        return;
      } catch (err) {
        if (Date.now() > this.ctx.hardDeadline) throw err;
        await sleep(1_000);
      }
    }
  }

  /** One request through the gateway, recorded. */
  private async call(
    method: string,
    route: string,
    init: { body?: unknown; raw?: string; headers?: Record<string, string>; auth?: boolean } = {},
  ): Promise<{ status: number; body: Json }> {
    if (init.auth !== false) await this.ensureToken();
    const started = Date.now();
    let status = 0;
    let body: Json = {};
    try {
      const res = await fetch(`${this.ctx.soak.base}${route}`, {
        method,
        headers: {
          ...(init.auth === false ? {} : { authorization: `Bearer ${this.token}` }),
          ...(init.body !== undefined || init.raw !== undefined
            ? { "content-type": "application/json" }
            : {}),
          ...init.headers,
        },
        body: init.raw ?? (init.body === undefined ? undefined : JSON.stringify(init.body)),
        signal: AbortSignal.timeout(20_000),
      });
      status = res.status;
      const text = await res.text();
      try {
        body = text ? (JSON.parse(text) as Json) : {};
      } catch {
        body = { text };
      }
    } catch {
      status = 0;
    }
    this.ctx.requests.push({
      at: started,
      ms: Date.now() - started,
      method,
      route: route.replace(/\/local-checkout\/[^/]+/, "/local-checkout/:id"),
      status,
      player: this.index,
      ...(status >= 500 ? { error: `${String(body.error)}: ${String(body.message)}`.slice(0, 200) } : {}),
    });
    return { status, body };
  }

  /** Retries what failed for a reason on the platform's side (no answer, 5xx, 429), as a client does. */
  private async retrying(
    what: () => Promise<{ status: number; body: Json }>,
    until = this.ctx.hardDeadline,
  ): Promise<{ status: number; body: Json }> {
    for (;;) {
      const res = await what();
      const transient = res.status === 0 || res.status >= 500 || res.status === 429;
      if (!transient || Date.now() > until) return res;
      await sleep(500 + Math.floor(this.ctx.random() * 500));
    }
  }

  private deliver(payload: string): Promise<boolean> {
    // Stripe retries a webhook until it is acknowledged; the soak until its hard deadline.
    return this.retrying(() =>
      this.call("POST", WEBHOOK_PATH, {
        raw: payload,
        headers: { "stripe-signature": stripeSignature(payload) },
        auth: false,
      }),
    ).then((res) => res.status === 200);
  }

  private async balance(): Promise<number | undefined> {
    const res = await this.retrying(() => this.call("GET", "/api/v1/credits/me"), this.ctx.loadEndsAt);
    return res.status === 200 ? (res.body.balance as number) : undefined;
  }

  async topUp(): Promise<void> {
    const amount = 2_000 + 500 * Math.floor(this.ctx.random() * 3);
    const key = randomUUID();
    const created = await this.retrying(
      () =>
        this.call("POST", "/api/v1/credits/topup", { body: { amount }, headers: { "idempotency-key": key } }),
      this.ctx.loadEndsAt,
    );
    if (created.status !== 200) return;
    const checkoutSessionId = String(created.body.checkoutUrl).split("/").pop()!;
    const payment: PaymentRecord = {
      player: this.index,
      accountId: this.accountId,
      checkoutSessionId,
      paymentIntentId: `pi_soak_${randomUUID().replace(/-/g, "")}`,
      amount,
      delivery: "once",
      acked: false,
      refundsAcked: [],
      accountDeleted: false,
    };
    this.ctx.payments.push(payment);
    this.ctx.stats.topups += 1;
    const session = (paymentStatus: string) => ({
      id: checkoutSessionId,
      object: "checkout.session",
      mode: "payment",
      status: "complete",
      payment_status: paymentStatus,
      amount_total: amount,
      currency: "usd",
      client_reference_id: this.accountId,
      payment_intent: payment.paymentIntentId,
      metadata: { accountId: this.accountId },
    });
    const paid = stripeEvent("checkout.session.completed", session("paid"));
    const roll = this.ctx.random();
    let acks: boolean[];
    if (roll < 0.2) {
      payment.delivery = "twice";
      acks = [await this.deliver(paid), await this.deliver(paid)];
    } else if (roll < 0.35) {
      payment.delivery = "twice at once";
      acks = await Promise.all([this.deliver(paid), this.deliver(paid)]);
    } else if (roll < 0.5) {
      // The async-payment success before the completed event that announced it (unpaid then): out of order.
      payment.delivery = "out of order";
      const succeeded = stripeEvent("checkout.session.async_payment_succeeded", session("paid"));
      acks = [
        await this.deliver(succeeded),
        await this.deliver(stripeEvent("checkout.session.completed", session("unpaid"))),
      ];
    } else {
      acks = [await this.deliver(paid)];
    }
    payment.acked = acks.some(Boolean);
  }

  /** Start, wait until ready, pair, connect, play a few seconds, stop: one journey. */
  async journey(): Promise<void> {
    const key = randomUUID();
    const started = await this.retrying(
      () => this.call("POST", "/api/v1/sessions/start", { body: {}, headers: { "idempotency-key": key } }),
      this.ctx.loadEndsAt,
    );
    if (started.status === 402) {
      await this.topUp();
      return;
    }
    if ((started.status < 200 || started.status >= 300) && started.status !== 409) return;
    this.ctx.stats.journeysStarted += 1;
    const ready = await this.pollUntil(
      (s) => (s.state === "running" && s.ready === true) || isEnded(s),
      45_000,
    );
    if (!ready || isEnded(ready)) {
      const last = await this.stop();
      if (ready) this.outcome("journeysEndedByFault", "before ready", ready);
      else this.outcome("journeysAbandoned", "not ready in 45 s", last);
      return;
    }
    await this.retrying(
      () => this.call("POST", "/api/v1/sessions/pair", { body: { deviceName: "soak-tv" } }),
      this.ctx.loadEndsAt,
    );
    await this.retrying(() => this.call("GET", "/api/v1/sessions/connect"), this.ctx.loadEndsAt);
    const instanceId = ready.instanceId as string;
    const playUntil = Math.min(
      this.ctx.loadEndsAt,
      Date.now() + 3_000 + Math.floor(this.ctx.random() * 6_000),
    );
    let ended: Json | undefined;
    while (Date.now() < playUntil) {
      await this.play(instanceId);
      const poll = await this.call("GET", "/api/v1/sessions/poll");
      if (poll.status === 200 && isEnded(poll.body)) {
        ended = poll.body;
        break;
      }
      await sleep(1_000);
    }
    if (ended) {
      this.outcome("journeysEndedByFault", "while playing", ended);
      return;
    }
    const last = await this.stop();
    if (last?.state === "stopped" && last.stopReason === "user") this.ctx.stats.journeysCompleted += 1;
    else if (last && isEnded(last)) this.outcome("journeysEndedByFault", "at the stop", last);
    else this.outcome("journeysAbandoned", "stop not confirmed", last);
  }

  private outcome(kind: "journeysEndedByFault" | "journeysAbandoned", when: string, last: Json | undefined) {
    this.ctx.stats[kind] += 1;
    // The message names the cause ("no longer exists", "did not start within …"); clock times are left out.
    const message =
      typeof last?.message === "string" ? last.message.replace(/\d\d:\d\d( UTC)?/g, "hh:mm") : "";
    const why = last
      ? `${String(last.state)}, ${String(last.stopReason ?? "")}${message ? ` (${message})` : ""}`
      : "no answer";
    const key = `${kind === "journeysAbandoned" ? "abandoned" : "ended by a fault"} ${when}: ${why}`;
    this.ctx.stats.outcomes[key] = (this.ctx.stats.outcomes[key] ?? 0) + 1;
  }

  /** The pretend streaming client on the instance (the simulator's control route `cgs session play --simulate` uses). */
  private async play(instanceId: string): Promise<void> {
    try {
      await fetch(
        `http://127.0.0.1:${this.ctx.soak.portOf("sessions")}/internal/v1/simulator/instances/${instanceId}/play`,
        {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ connected: true, input: true }),
          signal: AbortSignal.timeout(5_000),
        },
      );
    } catch {
      // sessions is being restarted: its simulated instances went with it.
    }
  }

  private async pollUntil(done: (s: Json) => boolean, timeoutMs: number): Promise<Json | undefined> {
    const deadline = Math.min(Date.now() + timeoutMs, this.ctx.hardDeadline);
    let last: Json | undefined;
    while (Date.now() < deadline) {
      const poll = await this.call("GET", "/api/v1/sessions/poll");
      if (poll.status === 200) {
        last = poll.body;
        if (done(poll.body)) return poll.body;
      }
      await sleep(1_000);
    }
    return last && done(last) ? last : undefined;
  }

  /** Stops the session (retried through faults) and waits until it has ended. */
  async stop(): Promise<Json | undefined> {
    const res = await this.retrying(() => this.call("POST", "/api/v1/sessions/stop"));
    if (res.status >= 400 && res.status !== 409) {
      const now = await this.call("GET", "/api/v1/sessions/poll");
      if (now.status === 200 && isEnded(now.body)) return now.body;
    }
    return this.pollUntil(isEnded, 60_000);
  }

  /** A refund (whole, or in two parts with a redelivery and a late stale event) or a dispute, won or lost. */
  async takeBack(): Promise<void> {
    const mine = this.ctx.payments.filter(
      (p) => p.player === this.index && p.acked && p.refundsAcked.length === 0 && !p.dispute,
    );
    if (mine.length === 0) return;
    const payment = mine[Math.floor(this.ctx.random() * mine.length)]!;
    const charge = (refunded: number) => ({
      id: `ch_${payment.paymentIntentId.slice(3)}`,
      object: "charge",
      payment_intent: payment.paymentIntentId,
      amount_refunded: refunded,
      currency: "usd",
    });
    if (this.ctx.random() < 0.6) {
      this.ctx.stats.refunds += 1;
      const parts =
        this.ctx.random() < 0.5
          ? [payment.amount]
          : [Math.floor(payment.amount / 4), Math.floor(payment.amount / 2)];
      for (const refunded of parts) {
        const event = stripeEvent("charge.refunded", charge(refunded));
        if (await this.deliver(event)) payment.refundsAcked.push(refunded);
        if (parts.length > 1 && (await this.deliver(event))) payment.refundsAcked.push(refunded);
      }
      // An older (smaller) cumulative amount arriving late.
      if (parts.length > 1 && (await this.deliver(stripeEvent("charge.refunded", charge(parts[0]!)))))
        payment.refundsAcked.push(parts[0]!);
    } else {
      this.ctx.stats.disputes += 1;
      const id = `dp_soak_${randomUUID().replace(/-/g, "")}`;
      const outcome = this.ctx.random() < 0.5 ? "won" : "lost";
      payment.dispute = { id, outcome, closedAcked: false };
      const dispute = (type: string, status: string) =>
        stripeEvent(type, {
          id,
          object: "dispute",
          charge: `ch_${payment.paymentIntentId.slice(3)}`,
          payment_intent: payment.paymentIntentId,
          amount: payment.amount,
          currency: "usd",
          status,
        });
      await this.deliver(dispute("charge.dispute.created", "needs_response"));
      payment.dispute.closedAcked = await this.deliver(dispute("charge.dispute.closed", outcome));
    }
  }

  /** Signs in (creating the Keycloak user on first use). */
  prepare(): Promise<void> {
    return this.ensureToken();
  }

  async deleteAccount(): Promise<boolean> {
    const res = await this.retrying(() => this.call("DELETE", "/api/v1/account/delete"), this.ctx.loadEndsAt);
    if (res.status >= 300) return false;
    this.ctx.stats.accountsDeleted += 1;
    for (const p of this.ctx.payments) if (p.player === this.index) p.accountDeleted = true;
    return true;
  }

  async run(deletes: boolean): Promise<void> {
    let journeys = 0;
    while (Date.now() < this.ctx.loadEndsAt) {
      const balance = await this.balance();
      if (balance === undefined) continue;
      if (balance < 400) {
        await this.topUp();
        await this.pollCredit(balance);
        continue;
      }
      await this.journey();
      journeys += 1;
      if (this.ctx.random() < 0.3) await this.takeBack();
      if (deletes && journeys >= 1) {
        if (await this.deleteAccount()) return;
      }
    }
  }

  private async pollCredit(before: number): Promise<void> {
    const deadline = Math.min(Date.now() + 20_000, this.ctx.loadEndsAt);
    while (Date.now() < deadline) {
      const now = await this.balance();
      if (now !== undefined && now > before) return;
      await sleep(1_000);
    }
  }
}

const isEnded = (s: Json) => s.state === "stopped" || s.state === "failed" || s.state === "idle";

/**
 * Runs `count` players until the load ends; every fourth one deletes its account after its first journey. Each
 * player ends with no session running (it stops what it started, retrying through faults).
 */
export async function runPlayers(ctx: PlayersContext, count: number, signedIn: () => void): Promise<void> {
  const players = Array.from({ length: count }, (_, i) => new Player(ctx, i));
  // Tokens first, one by one: token.mjs creates each user through Keycloak's admin API.
  for (const p of players) {
    await p.prepare();
  }
  signedIn();
  await Promise.all(
    players.map(async (p, i) => {
      await sleep(i * 300);
      try {
        await p.run(i % 4 === 3);
      } catch (err) {
        ctx.log(`player ${i}: ${err instanceof Error ? err.message : String(err)}`);
      }
    }),
  );
}
