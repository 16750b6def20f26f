/** `/devices`: the streaming devices paired with the player's machine, each with a Remove button. */
import { api, byId, dateTime, say } from "./api.js";
import "./layout.js";

interface Device {
  id: string;
  name: string;
  pairedAt: string;
  lastUsedAt: string | null;
}

const state = byId("devices-state");
const table = byId("devices-table");
const body = byId("devices-body");
const message = byId("devices-message");

function row(device: Device): HTMLTableRowElement {
  const tr = document.createElement("tr");
  const cell = (text: string) => {
    const td = document.createElement("td");
    td.textContent = text;
    tr.append(td);
  };
  cell(device.name);
  cell(dateTime(device.pairedAt));
  cell(device.lastUsedAt ? dateTime(device.lastUsedAt) : "Not yet");
  const actions = document.createElement("td");
  const remove = document.createElement("button");
  remove.type = "button";
  remove.className = "secondary";
  remove.textContent = "Remove";
  remove.setAttribute("aria-label", `Remove ${device.name}`);
  remove.addEventListener("click", async () => {
    remove.disabled = true;
    const res = await api<null>("DELETE", `/devices/${device.id}`);
    if (!res.ok) {
      remove.disabled = false;
      say(message, res.failure.message, "error");
      return;
    }
    await load();
    say(message, `${device.name} was unpaired.`, "success");
  });
  actions.append(remove);
  tr.append(actions);
  return tr;
}

async function load(): Promise<void> {
  const res = await api<{ items: Device[] }>("GET", "/devices");
  if (!res.ok) {
    say(state, res.failure.message, "error");
    return;
  }
  const devices = res.body.items;
  body.replaceChildren(...devices.map(row));
  table.hidden = devices.length === 0;
  state.className = "muted";
  state.textContent =
    devices.length === 0
      ? "No paired devices yet. Pair your streaming client from the Play page while a session runs."
      : `${devices.length} paired device${devices.length === 1 ? "" : "s"}.`;
}

void load();
