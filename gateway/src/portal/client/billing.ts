/** `/billing`: balance, top-up (presets or a custom amount within the contract's bounds), storage, ledger. */
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

byId("ledger-more").addEventListener("click", () => void loadLedger());
void loadCredits().then(() => {
  void loadStorage();
  void loadLedger();
  void afterCheckout();
});
