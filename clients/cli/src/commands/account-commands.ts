import { Command, InvalidArgumentError } from "commander";
import type { PreferencesPatch } from "@cgs/sdk";
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
