/** `/settings/tokens`: the token is in the server-rendered page; this adds the countdown to its expiry. */
import { byId, clock } from "./api.js";
import "./layout.js";

const expiry = byId("token-expiry");
const left = byId("token-left");
const expiresAt = new Date(expiry.getAttribute("datetime") ?? "").getTime();
expiry.textContent = new Date(expiresAt).toLocaleString();

function tick(): void {
  const seconds = (expiresAt - Date.now()) / 1000;
  left.textContent = seconds > 0 ? `(${clock(seconds)} left)` : "(expired: reload the page for a new one)";
}
tick();
window.setInterval(tick, 1000);
