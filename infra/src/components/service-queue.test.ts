import type { QueueConfig } from "../config";
import { mockResources, settled, stagingValue } from "../testing/component-harness";
import type { RecordedResource } from "../testing/stack-harness";
import { ServiceQueue } from "./service-queue";

let resources: RecordedResource[];
beforeAll(async () => {
  resources = await mockResources();
});

let built = 0;
function queue(change: (c: QueueConfig & { queueName: string }) => void = () => {}) {
  const config = { ...stagingValue<QueueConfig>("queues"), queueName: "test-cgs-billing" };
  change(config);
  return new ServiceQueue(`queue-${++built}`, { ...config, tags: {} });
}

describe("ServiceQueue", () => {
  it("when built from staging's settings, then a message received too often moves to a DLQ that keeps it longer", async () => {
    queue();
    await settled();
    const queues = resources.filter(
      (r) => r.type === "aws:sqs/queue:Queue" && r.name.startsWith(`queue-${built}`),
    );
    const main = queues.find((q) => q.inputs.name === "test-cgs-billing")!;
    const dlq = queues.find((q) => q.inputs.name === "test-cgs-billing-dlq")!;
    expect(JSON.parse(main.inputs.redrivePolicy as string)).toMatchObject({ maxReceiveCount: 5 });
    expect(main.inputs.messageRetentionSeconds).toBe(4 * 86_400);
    expect(dlq.inputs.messageRetentionSeconds).toBe(14 * 86_400);
  });

  it.each([
    [
      "more receives than SQS allows",
      (c: QueueConfig) => (c.maxReceiveCount = 1001),
      /cgs:queues.maxReceiveCount must be an integer from 1 to 1000 \(got 1001\)/,
    ],
    [
      "a negative visibility timeout",
      (c: QueueConfig) => (c.visibilityTimeoutSeconds = -1),
      /cgs:queues.visibilityTimeoutSeconds must be an integer from 0 to 43200/,
    ],
    [
      "a visibility timeout over 12 hours",
      (c: QueueConfig) => (c.visibilityTimeoutSeconds = 43_201),
      /cgs:queues.visibilityTimeoutSeconds/,
    ],
    [
      "a retention over 14 days",
      (c: QueueConfig) => (c.retentionDays = 15),
      /cgs:queues.retentionDays must be an integer from 1 to 14 \(got 15\)/,
    ],
    [
      "a fractional retention",
      (c: QueueConfig) => (c.retentionDays = 1.5),
      /cgs:queues.retentionDays must be an integer/,
    ],
    [
      "a DLQ that forgets sooner than its queue",
      (c: QueueConfig) => (c.dlqRetentionDays = 2),
      /cgs:queues.dlqRetentionDays must be an integer from 4 to 14 \(got 2\)/,
    ],
    [
      "a queue name with a dot",
      (c: { queueName: string }) => (c.queueName = "staging.cgs-billing"),
      /queue name must be letters, digits, - and _ \(at most 76\)/,
    ],
    [
      "a queue name too long for its DLQ",
      (c: { queueName: string }) => (c.queueName = "q".repeat(77)),
      /queue name must be letters/,
    ],
  ])("when the config has %s, then the queue is refused", (_what, change, message) => {
    expect(() => queue(change as (c: QueueConfig & { queueName: string }) => void)).toThrow(message);
  });
});
