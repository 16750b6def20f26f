export * from "./ensure-queue";
export * from "./event-consumer";
export * from "./event-publisher";
export * from "./event-routes";
export * from "./message-attributes";
export * from "./outbox";
export * from "./outbox-relay";
export * from "./sqs-client";
