/**
 * `/billing`: balance, top-up (presets or a custom amount within the contract's bounds), auto-recharge with its
 * saved card, spending limits, storage, ledger.
 */
import { api, byId, date, dateTime, money, say } from "./api.js";
import "./layout.js";

interface Credits {
  balance: number;
  currency: string;
  minutesRemaining: number;
  ratePerMinute: number;
}
interface StorageBilling {
  tier: string;
  sizeGb: number;
  pricePerPeriod: number;
  currency: string;
  period: { start: string; end: string };
  status: "paid" | "unpaid" | "none";
}
interface Transaction {
  id: string;
  type: string;
  amount: number;
  currency: string;
  balanceAfter: number;
  occurredAt: string;
  description: string;
}
interface AutoRecharge {
  enabled: boolean;
  threshold: number | null;
  rechargeTo: number | null;
  monthlyLimit: number | null;
  currency: string;
  rechargedThisMonth: number;
  monthResetsAt: string;
  failuresInARow: number;
  paymentMethod: { brand: string; last4: string; expMonth: number; expYear: number } | null;
  turnedOffReason: string | null;
  skippedReason: string | null;
  lastRecharge: {
    amount: number;
    status: "pending" | "succeeded" | "failed" | "requires_action" | "refunded";
    message: string | null;
    createdAt: string;
  } | null;
}
interface SpendLimits {
  daily: number | null;
  monthly: number | null;
  currency: string;
  spentToday: number;
  spentThisMonth: number;
  dayResetsAt: string;
  monthResetsAt: string;
}
interface TransactionPage {
  items: Transaction[];
  nextCursor: string | null;
}

const PENDING_KEY = "cgs.topup.pending";
const form = byId<HTMLFormElement>("topup-form");
const min = Number(form.dataset.min);
const max = Number(form.dataset.max);
const custom = byId<HTMLInputElement>("topup-custom");
const customError = byId("topup-custom-error");
const topupMessage = byId("topup-message");
const submit = byId<HTMLButtonElement>("topup-submit");
let currency = "USD";

async function loadCredits(): Promise<Credits | null> {
  const res = await api<Credits>("GET", "/credits/me");
  if (!res.ok) return null;
  const c = res.body;
  currency = c.currency;
  byId("balance").textContent = money(c.balance, c.currency);
  byId("minutes").textContent =
    `${c.minutesRemaining} min at ${money(c.ratePerMinute, c.currency)} per minute`;
  for (const label of document.querySelectorAll<HTMLElement>("[data-preset-label]")) {
    label.textContent = money(Number(label.dataset.presetLabel), c.currency);
  }
  return c;
}

async function loadStorage(): Promise<void> {
  const res = await api<StorageBilling>("GET", "/billing/storage");
  if (!res.ok) return;
  const s = res.body;
  byId("storage-tier").textContent =
    s.tier === "none" ? "None" : `${s.tier[0]!.toUpperCase()}${s.tier.slice(1)}`;
  byId("storage-size").textContent = `${s.sizeGb} GB`;
  byId("storage-price").textContent = `${money(s.pricePerPeriod, s.currency)} per month`;
  // The period's end is exclusive: the last day billed is the day before it.
  const lastDay = new Date(new Date(s.period.end).getTime() - 1).toISOString();
  byId("storage-period").textContent = `${date(s.period.start)} – ${date(lastDay)}`;
  byId("storage-status").textContent =
    s.status === "paid"
      ? "Paid"
      : s.status === "unpaid"
        ? "Unpaid: the next top-up pays it first"
        : "Nothing to bill";
}

let cursor: string | null = null;
/** Bumped when the history starts over, so a page still in flight for the old list is dropped, not appended. */
let ledgerGeneration = 0;
async function loadLedger({ restart = false } = {}): Promise<void> {
  if (restart) {
    ledgerGeneration += 1;
    cursor = null;
    byId("ledger-body").replaceChildren();
  }
  const generation = ledgerGeneration;
  const state = byId("ledger-state");
  const more = byId<HTMLButtonElement>("ledger-more");
  const query = `?limit=20${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
  more.disabled = true;
  const res = await api<TransactionPage>("GET", `/credits/transactions${query}`);
  if (generation !== ledgerGeneration) return;
  more.disabled = false;
  if (!res.ok) {
    state.textContent =
      res.failure.status === 404
        ? "History not available yet. Your balance above is always current."
        : "The history could not be loaded.";
    more.hidden = true;
    return;
  }
  const body = byId("ledger-body");
  for (const t of res.body.items) {
    const row = document.createElement("tr");
    const cells = [
      dateTime(t.occurredAt),
      t.description,
      `${t.amount > 0 ? "+" : ""}${money(t.amount, t.currency)}`,
      money(t.balanceAfter, t.currency),
    ];
    for (const [i, text] of cells.entries()) {
      const cell = document.createElement("td");
      cell.textContent = text;
      if (i >= 2) cell.className = "num";
      row.append(cell);
    }
    body.append(row);
  }
  byId("ledger-table").hidden = body.children.length === 0;
  state.textContent = body.children.length === 0 ? "No transactions yet." : "";
  cursor = res.body.nextCursor;
  more.hidden = cursor === null;
}

function chosenAmount(): number | null {
  const picked = form.querySelector<HTMLInputElement>("input[name=preset]:checked");
  if (picked && picked.value !== "custom") return Number(picked.value);
  const value = Number(custom.value);
  if (!custom.value || !Number.isFinite(value)) return null;
  return Math.round(value * 100);
}

function checkCustom(): boolean {
  const amount = chosenAmount();
  const ok = amount !== null && Number.isInteger(amount) && amount >= min && amount <= max;
  customError.textContent = ok
    ? ""
    : `Enter an amount from ${money(min, currency)} to ${money(max, currency)}.`;
  custom.setAttribute("aria-invalid", String(!ok));
  return ok;
}

form.addEventListener("change", () => {
  const picked = form.querySelector<HTMLInputElement>("input[name=preset]:checked");
  custom.disabled = picked?.value !== "custom";
  if (custom.disabled) {
    customError.textContent = "";
    custom.removeAttribute("aria-invalid");
  }
});

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const picked = form.querySelector<HTMLInputElement>("input[name=preset]:checked");
  if (picked?.value === "custom" && !checkCustom()) {
    custom.focus();
    return;
  }
  const amount = chosenAmount();
  if (amount === null) return;
  submit.disabled = true;
  say(topupMessage, "Opening the checkout page…");
  const before = await loadCredits();
  const res = await api<{ checkoutUrl: string }>("POST", "/credits/topup", { amount });
  if (!res.ok) {
    submit.disabled = false;
    const text =
      res.failure.error === "ACCOUNT_PENDING_DELETION"
        ? "Your account is scheduled for deletion, so top-ups are disabled."
        : res.failure.error === "VALIDATION_ERROR"
          ? `Enter an amount from ${money(min, currency)} to ${money(max, currency)}.`
          : res.failure.message;
    say(topupMessage, text, "error");
    return;
  }
  sessionStorage.setItem(PENDING_KEY, JSON.stringify({ amount, balanceBefore: before?.balance ?? null }));
  window.location.assign(res.body.checkoutUrl);
});

/** Back from checkout: the credit lands when the payment provider's webhook does, so watch the balance. */
async function afterCheckout(): Promise<void> {
  const outcome = new URLSearchParams(window.location.search).get("topup");
  const pending = JSON.parse(sessionStorage.getItem(PENDING_KEY) ?? "null") as {
    amount: number;
    balanceBefore: number | null;
  } | null;
  sessionStorage.removeItem(PENDING_KEY);
  history.replaceState(null, "", "/billing");
  if (outcome === "cancelled") {
    say(topupMessage, "Top-up cancelled. Nothing was charged.", "info");
    return;
  }
  if (outcome !== "success") return;
  say(topupMessage, "Payment received. Waiting for the credit to arrive…", "info");
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const c = await loadCredits();
    if (c && (pending?.balanceBefore == null || c.balance !== pending.balanceBefore)) {
      say(
        topupMessage,
        pending
          ? `Your top-up of ${money(pending.amount, c.currency)} has been credited.`
          : "Your balance is updated.",
        "success",
      );
      void loadStorage();
      void loadLedger({ restart: true });
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 2_000));
  }
  say(topupMessage, "The payment is still being confirmed. The balance updates when it is.", "info");
}

// ---------- auto-recharge and its card ----------

const rechargeForm = byId<HTMLFormElement>("recharge-form");
const rechargeMessage = byId("recharge-message");
const rechargeFields = {
  enabled: byId<HTMLInputElement>("recharge-enabled"),
  threshold: byId<HTMLInputElement>("recharge-threshold"),
  rechargeTo: byId<HTMLInputElement>("recharge-to"),
  monthlyLimit: byId<HTMLInputElement>("recharge-limit"),
};
const toInput = (minor: number | null) => (minor === null ? "" : (minor / 100).toFixed(2));
/** The player has changed the form: a refresh (waiting for a saved card) must not overwrite it. */
let rechargeEdited = false;
rechargeForm.addEventListener("input", () => (rechargeEdited = true));
/** A money field in minor units: null when empty, NaN when not an amount. */
const fromInput = (input: HTMLInputElement): number | null => {
  if (input.value.trim() === "") return null;
  const value = Number(input.value);
  return Number.isFinite(value) && value > 0 ? Math.round(value * 100) : NaN;
};

const RECHARGE_WORDS: Record<NonNullable<AutoRecharge["lastRecharge"]>["status"], string> = {
  pending: "waiting for the payment to be confirmed",
  succeeded: "credited",
  failed: "failed",
  requires_action: "needs your bank's confirmation",
  refunded: "refunded",
};

function renderAutoRecharge(a: AutoRecharge): void {
  const card = a.paymentMethod;
  byId("card").textContent = card
    ? `${card.brand[0]!.toUpperCase()}${card.brand.slice(1)} ending ${card.last4}, expires ${String(card.expMonth).padStart(2, "0")}/${card.expYear}`
    : "No card saved";
  byId("card-save").textContent = card ? "Replace card" : "Save a card";
  byId("card-remove").hidden = !card;
  byId("recharge-status").textContent =
    a.enabled && a.threshold !== null && a.rechargeTo !== null
      ? `On: under ${money(a.threshold, a.currency)}, back to ${money(a.rechargeTo, a.currency)}`
      : "Off";
  byId("recharge-month").textContent =
    a.monthlyLimit === null
      ? money(a.rechargedThisMonth, a.currency)
      : `${money(a.rechargedThisMonth, a.currency)} of ${money(a.monthlyLimit, a.currency)}`;
  const last = a.lastRecharge;
  byId("recharge-last").textContent = last
    ? `${money(last.amount, a.currency)}, ${RECHARGE_WORDS[last.status]} (${dateTime(last.createdAt)})${last.message ? `: ${last.message}` : ""}`
    : "—";
  const notice = a.turnedOffReason ?? a.skippedReason;
  const banner = byId("recharge-notice");
  banner.hidden = !notice;
  banner.textContent = notice ?? "";
  if (rechargeEdited) return;
  rechargeFields.enabled.checked = a.enabled;
  rechargeFields.threshold.value = toInput(a.threshold);
  rechargeFields.rechargeTo.value = toInput(a.rechargeTo);
  rechargeFields.monthlyLimit.value = toInput(a.monthlyLimit);
}

async function loadAutoRecharge(): Promise<AutoRecharge | null> {
  const res = await api<AutoRecharge>("GET", "/credits/auto-recharge");
  if (!res.ok) return null;
  renderAutoRecharge(res.body);
  return res.body;
}

rechargeForm.addEventListener("submit", async (event) => {
  event.preventDefault();
  const patch: Record<string, unknown> = { enabled: rechargeFields.enabled.checked };
  for (const field of ["threshold", "rechargeTo", "monthlyLimit"] as const) {
    const value = fromInput(rechargeFields[field]);
    if (Number.isNaN(value)) {
      say(rechargeMessage, "Enter amounts such as 5.00.", "error");
      rechargeFields[field].focus();
      return;
    }
    if (value !== null) patch[field] = value;
  }
  byId<HTMLButtonElement>("recharge-save").disabled = true;
  const res = await api<AutoRecharge>("PATCH", "/credits/auto-recharge", patch);
  byId<HTMLButtonElement>("recharge-save").disabled = false;
  if (!res.ok) {
    say(rechargeMessage, res.failure.message, "error");
    return;
  }
  rechargeEdited = false;
  renderAutoRecharge(res.body);
  say(rechargeMessage, res.body.enabled ? "Auto-recharge is on." : "Auto-recharge is off.", "success");
});

byId("card-save").addEventListener("click", async () => {
  say(rechargeMessage, "Opening the payment provider's page…");
  const res = await api<{ checkoutUrl: string }>("POST", "/credits/payment-method");
  if (!res.ok) {
    say(rechargeMessage, res.failure.message, "error");
    return;
  }
  window.location.assign(res.body.checkoutUrl);
});

byId("card-remove").addEventListener("click", async () => {
  const res = await api("DELETE", "/credits/payment-method");
  if (!res.ok) {
    say(rechargeMessage, res.failure.message, "error");
    return;
  }
  await loadAutoRecharge();
  say(rechargeMessage, "Card removed; auto-recharge is off.", "success");
});

/** Back from the card setup page: the card appears once the payment provider's webhook confirms it. */
async function afterCardSetup(outcome: string): Promise<void> {
  if (outcome === "cancelled") {
    say(rechargeMessage, "No card was saved.", "info");
    return;
  }
  say(rechargeMessage, "Waiting for the payment provider to confirm the card…", "info");
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const a = await loadAutoRecharge();
    if (a?.paymentMethod) {
      // Said only while the player has not started on the form (its own answers take the line then).
      if (!rechargeEdited) say(rechargeMessage, "Card saved. Turn auto-recharge on below.", "success");
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 2_000));
  }
  say(rechargeMessage, "The card is still being confirmed; it appears here once it is.", "info");
}

// ---------- spending limits ----------

const limitsMessage = byId("limits-message");
const dailyLimit = byId<HTMLInputElement>("limit-daily");
const monthlyLimit = byId<HTMLInputElement>("limit-monthly");

function renderLimits(l: SpendLimits): void {
  byId("spent-today").textContent =
    l.daily === null
      ? money(l.spentToday, l.currency)
      : `${money(l.spentToday, l.currency)} of ${money(l.daily, l.currency)}`;
  byId("spent-month").textContent =
    l.monthly === null
      ? money(l.spentThisMonth, l.currency)
      : `${money(l.spentThisMonth, l.currency)} of ${money(l.monthly, l.currency)}`;
  dailyLimit.value = toInput(l.daily);
  monthlyLimit.value = toInput(l.monthly);
}

async function loadLimits(): Promise<void> {
  const res = await api<SpendLimits>("GET", "/credits/limits");
  if (res.ok) renderLimits(res.body);
}

byId<HTMLFormElement>("limits-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const daily = fromInput(dailyLimit);
  const monthly = fromInput(monthlyLimit);
  if (Number.isNaN(daily) || Number.isNaN(monthly)) {
    say(limitsMessage, "Enter amounts such as 20.00, or leave a field empty for no limit.", "error");
    return;
  }
  const res = await api<SpendLimits>("PATCH", "/credits/limits", { daily, monthly });
  if (!res.ok) {
    say(limitsMessage, res.failure.message, "error");
    return;
  }
  renderLimits(res.body);
  say(limitsMessage, "Limits saved.", "success");
});

byId("ledger-more").addEventListener("click", () => void loadLedger());
const cardOutcome = new URLSearchParams(window.location.search).get("card");
void loadCredits().then(() => {
  void loadStorage();
  void loadLedger();
  void loadLimits();
  void loadAutoRecharge();
  if (cardOutcome) {
    history.replaceState(null, "", "/billing");
    void afterCardSetup(cardOutcome);
  } else {
    void afterCheckout();
  }
});
