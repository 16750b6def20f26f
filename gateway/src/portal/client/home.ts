/**
 * `/`: balance, the regions with this browser's round trip to each and the choice of one, the session card
 * (start, the place in line, progress, PIN, connect info, private-network key, stop).
 */
import type { components } from "@cgs/sdk";
import { api, byId, clock, dateTime, money, say, type ApiFailure } from "./api.js";
import "./layout.js";
import { COUNTED_SAMPLES, listRegions, measure, type MeasuredRegion, type Region } from "./regions.js";

type SessionStatus = components["schemas"]["SessionStatus"];
type StartSessionRequest = components["schemas"]["StartSessionRequest"];
type Preferences = components["schemas"]["Preferences"];
interface Credits {
  balance: number;
  currency: string;
  minutesRemaining: number;
  ratePerMinute: number;
}

// The poll bucket allows 30 a minute per account: 2.5 s while something changes leaves room for a second tab.
const FAST_POLL_MS = 2_500;
const SLOW_POLL_MS = 15_000;
const IDLE_POLL_MS = 30_000;
const CREDITS_REFRESH_MS = 30_000;
const QUEUED_POLL_MS = 5_000;
const MIN_POLL_GAP_MS = 2_000;
/** The contract's default bound for `auto`: farther regions are not worth playing in. */
const MAX_RTT_MS = 150;

const el = {
  balance: byId("balance"),
  minutes: byId("minutes"),
  rate: byId("rate"),
  state: byId("session-state"),
  region: byId("session-region"),
  regionsTable: byId("regions-table"),
  regionsBody: byId("regions-body"),
  regionsState: byId("regions-state"),
  regionChoice: byId<HTMLSelectElement>("region-choice"),
  regionsMeasure: byId<HTMLButtonElement>("regions-measure"),
  waitInLine: byId<HTMLButtonElement>("wait-in-line"),
  ready: byId("session-ready"),
  started: byId("session-started"),
  elapsed: byId("session-elapsed"),
  cost: byId("session-cost"),
  progress: byId<HTMLProgressElement>("session-progress"),
  progressText: byId("session-progress-text"),
  start: byId<HTMLButtonElement>("start"),
  stop: byId<HTMLButtonElement>("stop"),
  message: byId("session-message"),
  warning: byId("session-warning"),
  warningText: byId("session-warning-text"),
  warningLeft: byId("session-warning-left"),
  keepPlaying: byId<HTMLButtonElement>("keep-playing"),
  warningTopup: byId("warning-topup"),
  warningLimits: byId("warning-limits"),
  play: byId("play"),
  pin: byId("pin"),
  pinCountdown: byId("pin-countdown"),
  newPin: byId<HTMLButtonElement>("new-pin"),
  connectIp: byId("connect-ip"),
  connectPort: byId("connect-port"),
  vpnCreate: byId<HTMLButtonElement>("vpn-create"),
  vpnBox: byId("vpn-box"),
  vpnKey: byId<HTMLInputElement>("vpn-key"),
  vpnExpiry: byId("vpn-expiry"),
};

let session: SessionStatus | null = null;
let credits: Credits | null = null;
let pinExpiresAt = 0;
let startBlockedUntil = 0;
let pollTimer: number | undefined;
let lastPollAt = 0;
let creditsTimer: number | undefined;
let regions: Region[] = [];
let measured: Promise<MeasuredRegion[]> = Promise.resolve([]);
/** The last start refused for capacity: "Wait in line" sends it again with `queue: true`. */
let refusedStart: StartSessionRequest | null = null;

const STATE_TEXT: Record<SessionStatus["state"], string> = {
  idle: "No session",
  queued: "In line",
  starting: "Starting",
  running: "Running",
  stopping: "Stopping",
  stopped: "Stopped",
  failed: "Failed",
};
const ACTIVE = new Set(["queued", "starting", "running", "stopping"]);
/** The active states that are charged: waiting in line costs nothing. */
const CHARGED = new Set(["starting", "running", "stopping"]);

function explain(failure: ApiFailure): void {
  el.message.replaceChildren();
  el.message.className = "message error";
  el.waitInLine.hidden = true;
  switch (failure.error) {
    case "INSUFFICIENT_CREDITS": {
      const link = document.createElement("a");
      link.href = "/billing";
      link.textContent = "Top up your balance";
      el.message.append("Your balance does not cover the 15 minutes a session needs to start. ", link, ".");
      break;
    }
    case "CLOUD_CAPACITY": {
      const wait = failure.retryAfter ?? 30;
      startBlockedUntil = Date.now() + wait * 1000;
      el.message.textContent = `Every region you allowed is full right now. Nothing was charged. Try again in ${wait} s, or wait in line for the next free machine (free of charge while you wait).`;
      el.waitInLine.hidden = refusedStart === null;
      void refreshAvailability();
      break;
    }
    case "SESSION_ALREADY_RUNNING":
      el.message.textContent =
        "A session is already running (started from another tab or device). It is shown below.";
      void pollNow();
      break;
    case "SPEND_LIMIT_REACHED": {
      const link = document.createElement("a");
      link.href = "/billing#limits";
      link.textContent = "Change your spending limits";
      el.message.append(`${failure.message} `, link, ".");
      break;
    }
    case "ACCOUNT_PENDING_DELETION":
      el.message.textContent =
        "Your account is scheduled for deletion, so new sessions and top-ups are disabled.";
      break;
    case "VALIDATION_ERROR":
      el.message.textContent = /\bmaxRttMs\b/.test(failure.message)
        ? `No region answers this browser within ${MAX_RTT_MS} ms. Choose a region under Region to start anyway.`
        : failure.message;
      break;
    case "RATE_LIMITED":
      el.message.textContent = `Too many requests. Try again in ${failure.retryAfter ?? 60} s.`;
      break;
    case "SESSION_NOT_RUNNING":
      el.message.textContent = "There is no running session.";
      void pollNow();
      break;
    default:
      el.message.textContent = failure.message;
  }
}

function elapsedSeconds(): number {
  if (!session?.startedAt || !CHARGED.has(session.state)) return 0;
  return (Date.now() - new Date(session.startedAt).getTime()) / 1000;
}

/** Once a second, without a request: elapsed time, cost so far, the PIN countdown, the capacity wait. */
function tick(): void {
  const active = session !== null && CHARGED.has(session.state);
  const seconds = elapsedSeconds();
  el.elapsed.textContent = active && session?.startedAt ? clock(seconds) : "—";
  // Play is charged per started minute at the wallet's rate.
  el.cost.textContent =
    active && credits && session?.startedAt
      ? money(Math.max(1, Math.ceil(seconds / 60)) * credits.ratePerMinute, credits.currency)
      : "—";
  if (pinExpiresAt) {
    const left = (pinExpiresAt - Date.now()) / 1000;
    el.pinCountdown.textContent = left > 0 ? `expires in ${clock(left)}` : "expired: ask for a new PIN";
    el.pin.classList.toggle("expired", left <= 0);
  }
  const warning = session?.state === "running" ? session.warning : null;
  if (warning) {
    const left = (new Date(warning.stopsAt).getTime() - Date.now()) / 1000;
    el.warningLeft.textContent = left > 0 ? `(${clock(left)} left)` : "(now)";
  }
  const wait = Math.ceil((startBlockedUntil - Date.now()) / 1000);
  const canStart = session !== null && !ACTIVE.has(session.state);
  el.start.hidden = !canStart && session !== null;
  el.start.disabled = !canStart || wait > 0;
  el.start.textContent = wait > 0 ? `Start (retry in ${wait} s)` : "Start";
}

function renderCredits(): void {
  if (!credits) return;
  el.balance.textContent = money(credits.balance, credits.currency);
  el.minutes.textContent = `${credits.minutesRemaining} min`;
  el.rate.textContent = `${money(credits.ratePerMinute, credits.currency)} per minute`;
}

function renderSession(next: SessionStatus): void {
  const becameReady =
    next.ready && next.state === "running" && !(session?.ready && session.state === "running");
  // A note about the previous state ("starting…") is stale once the state moves on; errors stay until the next action.
  if (session && session.state !== next.state && !el.message.classList.contains("error")) say(el.message, "");
  session = next;
  el.state.textContent = STATE_TEXT[next.state];
  el.state.dataset.state = next.state;
  el.region.textContent = next.region ? regionName(next.region) : "—";
  el.ready.textContent = next.ready ? "Yes" : "No";
  el.started.textContent = next.startedAt && next.state !== "queued" ? dateTime(next.startedAt) : "—";
  el.stop.disabled = !(next.state === "queued" || next.state === "starting" || next.state === "running");
  el.stop.hidden = !ACTIVE.has(next.state);
  el.stop.textContent = next.state === "queued" ? "Leave the line" : "Stop";
  if (next.state !== "idle" && next.state !== "stopped" && next.state !== "failed")
    el.waitInLine.hidden = true;

  // While it starts, the service names the phase and its estimate ("Starting a warm machine, about 30 s").
  const phase = next.warning ? null : next.message;
  const steps: [number, string] =
    next.state === "queued"
      ? [0, queueText(next.queue)]
      : next.state === "starting"
        ? [1, phase ?? "Requesting a cloud instance…"]
        : next.state === "running" && !next.ready
          ? [2, phase ?? "Instance up; waiting for the streaming host…"]
          : next.state === "running"
            ? [3, "Ready to play"]
            : next.state === "stopping"
              ? [3, "Stopping the instance…"]
              : [0, next.state === "failed" ? (next.message ?? "The session failed.") : (next.message ?? "")];
  el.progress.value = steps[0];
  el.progress.hidden = !ACTIVE.has(next.state) || next.state === "queued";
  el.progressText.textContent = steps[1];

  renderWarning(next);
  const playing = next.state === "running" && next.ready;
  el.play.hidden = !playing;
  if (becameReady) {
    void mintPin();
    void loadConnect();
  }
  if (!playing) {
    pinExpiresAt = 0;
    el.vpnBox.hidden = true;
  }
  tick();
}

function regionName(id: string): string {
  return regions.find((r) => r.id === id)?.name ?? id;
}

/** 1 → "1st", 2 → "2nd", 11 → "11th", 23 → "23rd". */
function ordinal(n: number): string {
  const tens = n % 100;
  const suffix = tens >= 11 && tens <= 13 ? "th" : (["th", "st", "nd", "rd"][n % 10] ?? "th");
  return `${n}${suffix}`;
}

function waitText(seconds: number): string {
  if (seconds < 60) return "under a minute";
  return `about ${Math.round(seconds / 60)} min`;
}

/** "In line for Europe (Ireland): 3rd, about 4 min", from poll's `queue`. */
function queueText(queue: SessionStatus["queue"]): string {
  if (!queue) return "In line for the next free machine…";
  const where = queue.regions.map(regionName).join(" or ");
  return `In line for ${where || "the next free machine"}: ${ordinal(queue.position)}, ${waitText(queue.estimatedWaitSeconds)}`;
}

/** An automatic stop ahead: what happens and when, and what the player can do about it. */
function renderWarning(next: SessionStatus): void {
  const warning = next.state === "running" ? next.warning : null;
  el.warning.hidden = !warning;
  if (!warning) return;
  // The service says the time in UTC (it does not know the player's zone); the page says it in local time.
  const local = new Date(warning.stopsAt).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  el.warningText.textContent = (next.message ?? "").replace(/\d\d:\d\d UTC/, local);
  el.warning.dataset.kind = warning.kind;
  el.keepPlaying.hidden = !warning.canKeepPlaying;
  el.warningTopup.hidden = warning.kind !== "credits";
  el.warningLimits.hidden = warning.kind !== "spend_limit";
}

function schedulePoll(ms: number): void {
  window.clearTimeout(pollTimer);
  pollTimer = window.setTimeout(() => void pollNow(), ms);
}

async function pollNow(): Promise<void> {
  window.clearTimeout(pollTimer);
  // Never two polls closer than 2 s, whoever asks (a refused start, the timer).
  const wait = lastPollAt + MIN_POLL_GAP_MS - Date.now();
  if (wait > 0) {
    schedulePoll(wait);
    return;
  }
  lastPollAt = Date.now();
  const res = await api<SessionStatus>("GET", "/sessions/poll");
  if (!res.ok) {
    if (res.failure.status === 429) {
      const wait = res.failure.retryAfter ?? 10;
      say(el.progressText, `Checking too often; next check in ${wait} s.`, "info");
      schedulePoll(wait * 1000);
    } else {
      schedulePoll(SLOW_POLL_MS);
    }
    return;
  }
  const wasActive = session !== null && ACTIVE.has(session.state);
  renderSession(res.body);
  const s = res.body;
  // Refresh the balance when play begins (cost ticks from its rate) and when it ends (the charge lands).
  if (wasActive !== ACTIVE.has(s.state)) void loadCredits();
  const changing = s.state === "starting" || s.state === "stopping" || (s.state === "running" && !s.ready);
  // A hidden tab leaves the budget to the visible one unless something is changing.
  schedulePoll(
    changing
      ? FAST_POLL_MS
      : s.state === "queued"
        ? QUEUED_POLL_MS
        : s.state === "running" && !document.hidden
          ? SLOW_POLL_MS
          : IDLE_POLL_MS,
  );
}

async function loadCredits(): Promise<void> {
  window.clearTimeout(creditsTimer);
  const res = await api<Credits>("GET", "/credits/me");
  if (res.ok) {
    credits = res.body;
    renderCredits();
    tick();
  }
  if (session && ACTIVE.has(session.state)) {
    creditsTimer = window.setTimeout(() => void loadCredits(), CREDITS_REFRESH_MS);
  }
}

/** A session action behind a button: the button waits for the answer; a refusal is explained. */
async function act<T>(button: HTMLButtonElement, path: string): Promise<T | null> {
  button.disabled = true;
  const res = await api<T>("POST", path);
  button.disabled = false;
  if (res.ok) return res.body;
  explain(res.failure);
  return null;
}

async function mintPin(): Promise<void> {
  const minted = await act<{ pin: string; expiresAt: string }>(el.newPin, "/sessions/pair");
  if (!minted) return;
  el.pin.textContent = minted.pin;
  pinExpiresAt = new Date(minted.expiresAt).getTime();
  tick();
}

async function loadConnect(): Promise<void> {
  const res = await api<{ privateNetIp: string; port: number }>("GET", "/sessions/connect");
  if (!res.ok) return;
  el.connectIp.textContent = res.body.privateNetIp;
  el.connectPort.textContent = String(res.body.port);
}

/** The start's body from the Region choice: one region, or `auto` with this browser's measured round trips. */
async function startRequest(): Promise<StartSessionRequest> {
  const choice = el.regionChoice.value;
  if (choice !== "auto") return { region: choice };
  const rttMs: Record<string, number> = {};
  for (const region of await measured) if (region.rttMs !== null) rttMs[region.id] = region.rttMs;
  return Object.keys(rttMs).length > 0
    ? { region: "auto", rttMs, maxRttMs: MAX_RTT_MS }
    : { region: "auto", maxRttMs: MAX_RTT_MS };
}

async function start(request: StartSessionRequest, button: HTMLButtonElement): Promise<void> {
  button.disabled = true;
  el.waitInLine.hidden = true;
  say(el.message, request.queue ? "Joining the line…" : "Starting…");
  refusedStart = request;
  const res = await api<SessionStatus>("POST", "/sessions/start", request);
  button.disabled = false;
  if (!res.ok) {
    explain(res.failure);
    tick();
    return;
  }
  refusedStart = null;
  // Rendered first: a new state clears the previous state's note.
  renderSession(res.body);
  say(
    el.message,
    res.body.state === "queued"
      ? "You are in line. Nothing is charged while you wait; this page updates by itself."
      : "Session starting. This page updates by itself.",
    "success",
  );
  schedulePoll(res.body.state === "queued" ? QUEUED_POLL_MS : FAST_POLL_MS);
  if (res.body.state === "queued") void refreshAvailability();
  void loadCredits();
}

el.start.addEventListener("click", async () => {
  el.start.disabled = true;
  say(el.message, "Starting…");
  await start(await startRequest(), el.start);
});

el.waitInLine.addEventListener("click", () => {
  if (refusedStart) void start({ ...refusedStart, queue: true }, el.waitInLine);
});

el.stop.addEventListener("click", async () => {
  el.stop.disabled = true;
  const res = await api<SessionStatus>("POST", "/sessions/stop");
  if (!res.ok) {
    explain(res.failure);
    return;
  }
  renderSession(res.body);
  say(
    el.message,
    res.body.state === "stopped"
      ? "You left the line. Nothing was charged."
      : "Stopping the session. Play is charged until the instance is gone.",
    "info",
  );
  schedulePoll(FAST_POLL_MS);
});

el.newPin.addEventListener("click", () => void mintPin());

el.keepPlaying.addEventListener("click", async () => {
  const kept = await act<SessionStatus>(el.keepPlaying, "/sessions/keepalive");
  if (!kept) return;
  renderSession(kept);
  say(el.message, "Keep playing: the session goes on.", "success");
});

el.vpnCreate.addEventListener("click", async () => {
  const key = await act<{ key: string; expiresAt: string }>(el.vpnCreate, "/sessions/vpn-key");
  if (!key) return;
  el.vpnKey.value = key.key;
  el.vpnExpiry.textContent = `Single use; expires ${dateTime(key.expiresAt)}.`;
  el.vpnBox.hidden = false;
});

function renderRegions(list: readonly MeasuredRegion[]): void {
  const nearest = list.find((r) => r.rttMs !== null);
  el.regionsBody.replaceChildren(
    ...list.map((region) => {
      const row = document.createElement("tr");
      row.dataset.region = region.id;
      const name = document.createElement("td");
      name.textContent = region.name;
      if (region === nearest) {
        const badge = document.createElement("span");
        badge.className = "badge";
        badge.textContent = "Nearest";
        name.append(" ", badge);
      }
      const rtt = document.createElement("td");
      rtt.className = "num";
      rtt.textContent = region.rttMs === null ? "No answer" : `${region.rttMs} ms`;
      const capacity = document.createElement("td");
      capacity.textContent = [
        region.available ? "Available" : "Full",
        ...(region.queueLength > 0 ? [`${region.queueLength} in line`] : []),
      ].join(", ");
      row.append(name, rtt, capacity);
      return row;
    }),
  );
  el.regionsTable.hidden = list.length === 0;
}

/** Capacity and lines change by the minute: re-read them, keeping this browser's measurements. */
async function refreshAvailability(): Promise<void> {
  const listed = await listRegions();
  if (!listed.ok) return;
  const now = new Map(listed.regions.map((r) => [r.id, r]));
  const list = (await measured).map((r) => ({ ...r, ...now.get(r.id), rttMs: r.rttMs }));
  measured = Promise.resolve(list);
  renderRegions(list);
}

function fillChoice(preferred: string | null): void {
  const current = el.regionChoice.value;
  const options = [new Option("Nearest (auto)", "auto"), ...regions.map((r) => new Option(r.name, r.id))];
  el.regionChoice.replaceChildren(...options);
  const wanted = preferred ?? current;
  el.regionChoice.value = options.some((o) => o.value === wanted) ? wanted : "auto";
  el.regionChoice.disabled = false;
}

async function loadRegions(preferred: Promise<string | null>): Promise<void> {
  el.regionsMeasure.disabled = true;
  el.regionsState.textContent = "Measuring…";
  const listed = await listRegions();
  if (!listed.ok) {
    el.regionsState.textContent = "The regions could not be loaded; sessions start in your preferred region.";
    el.regionsMeasure.disabled = false;
    return;
  }
  regions = listed.regions;
  fillChoice(await preferred);
  measured = measure(regions);
  const list = await measured;
  renderRegions(list);
  const nearest = list.find((r) => r.rttMs !== null);
  el.regionsState.textContent = nearest
    ? `Median of ${COUNTED_SAMPLES} round trips from this browser. Nearest: ${nearest.name}.`
    : "No region's beacon answered this browser; choose a region to start in.";
  el.regionsMeasure.disabled = false;
  if (session?.region) el.region.textContent = regionName(session.region);
}

async function preferredRegion(): Promise<string | null> {
  const res = await api<Preferences>("GET", "/settings");
  return res.ok ? res.body.region : null;
}

el.regionsMeasure.addEventListener("click", () => void loadRegions(Promise.resolve(null)));

document.addEventListener("visibilitychange", () => {
  if (!document.hidden) void pollNow();
});
window.setInterval(tick, 1000);
void loadCredits().then(() => pollNow());
void loadRegions(preferredRegion());
