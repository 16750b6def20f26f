import { Command, InvalidArgumentError } from "commander";
import type {
  AutoRecharge,
  AutoRechargePatch,
  PreferencesPatch,
  SpendLimits,
  SpendLimitsPatch,
} from "@cgs/sdk";
import { UsageError } from "../cli-errors";
import { ask, emit, money, note, openInBrowser } from "../terminal-output";
import { action } from "./command-action";

/**
 * `KEY=VALUE` pairs to a preferences patch. Values read as JSON scalars (whole numbers, true/false), anything
 * else as text; no field list lives here: the API validates names, types and ranges against the contract and
 * names a bad field.
 */
export function parseSettings(pairs: string[]): PreferencesPatch {
  const patch: Record<string, unknown> = {};
  for (const pair of pairs) {
    const at = pair.indexOf("=");
    if (at < 1) throw new UsageError(`expected KEY=VALUE, got "${pair}"`);
    const key = pair.slice(0, at);
    const raw = pair.slice(at + 1);
    if (/^-?\d+$/.test(raw)) patch[key] = Number(raw);
    else if (raw === "true" || raw === "false") patch[key] = raw === "true";
    else patch[key] = raw;
  }
  return patch as PreferencesPatch;
}

const amountArgument = (value: string) => {
  if (!/^\d+$/.test(value))
    throw new InvalidArgumentError("must be a whole number of cents, e.g. 2000 for 20.00");
  return Number(value);
};

/** A limit in cents, or `none` to remove it. */
const limitArgument = (value: string) => (value === "none" ? null : amountArgument(value));

const day = (iso: string) => iso.slice(0, 10);

export function describeAutoRecharge(a: AutoRecharge): string {
  const m = (n: number) => money(n, a.currency);
  const lines = [
    a.threshold !== null && a.rechargeTo !== null && a.monthlyLimit !== null
      ? `Auto-recharge: ${a.enabled ? "on" : "off"}, under ${m(a.threshold)} recharge to ${m(a.rechargeTo)}, ` +
        `at most ${m(a.monthlyLimit)} a month (${m(a.rechargedThisMonth)} this month, until ${day(a.monthResetsAt)})`
      : `Auto-recharge: ${a.enabled ? "on" : "off"} (not set up)`,
    a.paymentMethod
      ? `Card: ${a.paymentMethod.brand} ending ${a.paymentMethod.last4}, expires ${String(a.paymentMethod.expMonth).padStart(2, "0")}/${a.paymentMethod.expYear}`
      : "Card: none saved (`cgs credits auto-recharge card --open`)",
  ];
  const r = a.lastRecharge;
  if (r)
    lines.push(
      `Last recharge: ${m(r.amount)} ${r.status.replace("_", " ")}, ${r.createdAt}${r.message ? `: ${r.message}` : ""}`,
    );
  if (a.failuresInARow > 0) lines.push(`Failures in a row: ${a.failuresInARow}`);
  if (a.turnedOffReason) lines.push(`Turned off: ${a.turnedOffReason}`);
  if (a.skippedReason) lines.push(`Skipped: ${a.skippedReason}`);
  return lines.join("\n");
}

export function describeLimits(l: SpendLimits): string {
  const m = (n: number) => money(n, l.currency);
  return [
    `Daily limit: ${l.daily === null ? "none" : m(l.daily)} (${m(l.spentToday)} spent today, UTC; resets ${l.dayResetsAt})`,
    `Monthly limit: ${l.monthly === null ? "none" : m(l.monthly)} (${m(l.spentThisMonth)} spent this month; resets ${l.monthResetsAt})`,
  ].join("\n");
}

interface RechargeOptions {
  threshold?: number;
  to?: number;
  monthlyLimit?: number;
}

const rechargePatch = (opts: RechargeOptions): AutoRechargePatch => ({
  ...(opts.threshold !== undefined ? { threshold: opts.threshold } : {}),
  ...(opts.to !== undefined ? { rechargeTo: opts.to } : {}),
  ...(opts.monthlyLimit !== undefined ? { monthlyLimit: opts.monthlyLimit } : {}),
});

const withAmounts = (command: Command) =>
  command
    .option("--threshold <cents>", "recharge when a charge takes the balance under this", amountArgument)
    .option("--to <cents>", "the balance a recharge brings the wallet back to", amountArgument)
    .option("--monthly-limit <cents>", "most that recharges may add up to in a UTC month", amountArgument);

function creditGuardrailCommands(credits: Command): void {
  const recharge = credits
    .command("auto-recharge")
    .description("Show auto-recharge: its settings, the saved card, the last recharge")
    .action(
      action(async (ctx) => {
        const a = await ctx.client().credits.autoRecharge.get();
        emit(ctx.options.json, a, () => describeAutoRecharge(a));
      }),
    );
  withAmounts(
    recharge
      .command("on")
      .description("Turn auto-recharge on (needs a saved card), optionally changing amounts"),
  ).action(
    action(async (ctx, opts: RechargeOptions) => {
      const a = await ctx.client().credits.autoRecharge.update({ enabled: true, ...rechargePatch(opts) });
      emit(ctx.options.json, a, () => describeAutoRecharge(a));
    }),
  );
  recharge
    .command("off")
    .description("Turn auto-recharge off")
    .action(
      action(async (ctx) => {
        const a = await ctx.client().credits.autoRecharge.update({ enabled: false });
        emit(ctx.options.json, a, () => describeAutoRecharge(a));
      }),
    );
  withAmounts(recharge.command("set").description("Change the amounts without turning it on or off")).action(
    action(async (ctx, opts: RechargeOptions) => {
      const patch = rechargePatch(opts);
      if (Object.keys(patch).length === 0)
        throw new UsageError("give at least one of --threshold, --to, --monthly-limit");
      const a = await ctx.client().credits.autoRecharge.update(patch);
      emit(ctx.options.json, a, () => describeAutoRecharge(a));
    }),
  );
  recharge
    .command("card")
    .description("Save a card for auto-recharge: a checkout page in setup mode (nothing is charged)")
    .option("--open", "open the page in your browser")
    .action(
      action(async (ctx, opts: { open?: boolean }) => {
        const setup = await ctx.client().credits.paymentMethod.setup();
        if (opts.open) openInBrowser(setup.checkoutUrl);
        emit(
          ctx.options.json,
          setup,
          () =>
            `Save your card here:\n  ${setup.checkoutUrl}\nIt shows in \`cgs credits auto-recharge\` once the payment provider confirms it.`,
        );
      }),
    );
  recharge
    .command("remove-card")
    .description("Remove the saved card (auto-recharge turns off)")
    .action(
      action(async (ctx) => {
        await ctx.client().credits.paymentMethod.remove();
        const a = await ctx.client().credits.autoRecharge.get();
        emit(ctx.options.json, a, () => `Card removed.\n${describeAutoRecharge(a)}`);
      }),
    );

  const limits = credits
    .command("limits")
    .description("Show your daily and monthly spending limits (UTC) and what was spent")
    .action(
      action(async (ctx) => {
        const l = await ctx.client().credits.limits.get();
        emit(ctx.options.json, l, () => describeLimits(l));
      }),
    );
  limits
    .command("set")
    .description("Set spending limits in cents (`none` removes one); play stops at a limit, after a warning")
    .option("--daily <cents|none>", "limit per UTC day", limitArgument)
    .option("--monthly <cents|none>", "limit per UTC calendar month", limitArgument)
    .action(
      action(async (ctx, opts: { daily?: number | null; monthly?: number | null }) => {
        const patch: SpendLimitsPatch = {
          ...(opts.daily !== undefined ? { daily: opts.daily } : {}),
          ...(opts.monthly !== undefined ? { monthly: opts.monthly } : {}),
        };
        if (Object.keys(patch).length === 0) throw new UsageError("give --daily and/or --monthly");
        const l = await ctx.client().credits.limits.update(patch);
        emit(ctx.options.json, l, () => describeLimits(l));
      }),
    );
}

export function accountCommands(program: Command): void {
  const credits = program
    .command("credits")
    .description("Show your credit balance")
    .action(
      action(async (ctx) => {
        const c = await ctx.client().credits.me();
        emit(ctx.options.json, c, () =>
          [
            `Balance: ${money(c.balance, c.currency)} (about ${c.minutesRemaining} min of play at ${money(c.ratePerMinute, c.currency)}/min)`,
            `Storage: ${c.storage.tier}, ${c.storage.usedGb} of ${c.storage.sizeGb} GB used`,
          ].join("\n"),
        );
      }),
    );
  credits
    .command("topup")
    .description("Create a checkout to add AMOUNT cents of credit (e.g. 2000 = 20.00)")
    .argument("<amount>", "amount in cents of the wallet currency", amountArgument)
    .option("--open", "open the checkout page in your browser")
    .action(
      action(async (ctx, amount: number, opts: { open?: boolean }) => {
        const checkout = await ctx.client().credits.topup(amount);
        if (opts.open) openInBrowser(checkout.checkoutUrl);
        emit(
          ctx.options.json,
          checkout,
          () =>
            `Pay here to add the credit:\n  ${checkout.checkoutUrl}\nThe balance rises once the payment is confirmed (see \`cgs credits\`).`,
        );
      }),
    );

  creditGuardrailCommands(credits);

  program
    .command("storage")
    .description("Show your storage tier and billing period")
    .action(
      action(async (ctx) => {
        const s = await ctx.client().billing.storage();
        emit(ctx.options.json, s, () =>
          [
            `Tier: ${s.tier} (${s.sizeGb} GB), ${money(s.pricePerPeriod, s.currency)} per period`,
            `Period: ${s.period.start} to ${s.period.end} (${s.status})`,
          ].join("\n"),
        );
      }),
    );

  const settings = program
    .command("settings")
    .description("Show your streaming preferences")
    .action(
      action(async (ctx) => {
        const prefs = await ctx.client().settings.get();
        emit(ctx.options.json, prefs, () =>
          Object.entries(prefs)
            .map(([k, v]) => `${k}=${String(v)}`)
            .join("\n"),
        );
      }),
    );
  settings
    .command("set")
    .description("Change preferences, e.g. `cgs settings set fps=60 codec=h265`")
    .argument("<key=value...>", "one or more preferences to change")
    .action(
      action(async (ctx, pairs: string[]) => {
        const patch = parseSettings(pairs);
        const prefs = await ctx.client().settings.update(patch);
        emit(ctx.options.json, prefs, () =>
          Object.entries(prefs)
            .map(([k, v]) => `${k}=${String(v)}`)
            .join("\n"),
        );
      }),
    );

  const account = program.command("account").description("Manage your account");
  account
    .command("delete")
    .description("Schedule your account and its storage for deletion (30-day grace)")
    .option("--yes", "do not ask to type your e-mail to confirm")
    .action(
      action(async (ctx, opts: { yes?: boolean }) => {
        const client = ctx.client();
        if (!opts.yes) {
          const me = await client.account.identity();
          const expected = me.email ?? me.identityUserId;
          note(`This schedules ${expected} and its game storage for deletion after a 30-day grace period.`);
          const typed = await ask(`Type ${me.email ? "your e-mail" : "your user id"} to confirm: `);
          if (typed.toLowerCase() !== expected.toLowerCase())
            throw new UsageError("confirmation did not match; nothing was deleted");
        }
        const deletion = await client.account.delete();
        emit(
          ctx.options.json,
          deletion,
          () => `Account scheduled for deletion; it is purged at ${deletion.purgeAt}.`,
        );
      }),
    );
}
