import { eventTypes } from "../events";
import {
  consumesQueue,
  eventPublishers,
  platformEventRoutes,
  queuesPublishedToBy,
  serviceQueueNames,
  type EventRoutes,
} from "./event-routes";

describe("the platform's event routing table", () => {
  it("when infra asks who each service sends to, then the answer is read off the routes of the events it publishes", () => {
    expect(queuesPublishedToBy("sessions")).toEqual(["billing"]);
    expect(queuesPublishedToBy("billing")).toEqual(["sessions"]);
    expect(queuesPublishedToBy("accounts")).toEqual(["sessions", "billing"]);
    expect(queuesPublishedToBy("gateway")).toEqual([]);
  });

  it("when a route is added for an event, then its publisher gains send rights to that queue and no one else does", () => {
    const routes: EventRoutes = {
      ...platformEventRoutes,
      "metering.audit": [serviceQueueNames.sessions, serviceQueueNames.accounts],
    };
    expect(queuesPublishedToBy("billing", routes)).toEqual(["sessions", "accounts"]);
    expect(queuesPublishedToBy("sessions", routes)).toEqual(["billing"]);
  });

  it("when an event type exists, then it has a publisher and every destination is a queue some service owns", () => {
    const queues = new Set<string>(Object.values(serviceQueueNames));
    for (const type of eventTypes) {
      expect(eventPublishers[type]).toBeDefined();
      for (const destination of platformEventRoutes[type] ?? []) expect(queues.has(destination)).toBe(true);
    }
    expect(consumesQueue("billing")).toBe(true);
    expect(consumesQueue("gateway")).toBe(false);
  });
});
