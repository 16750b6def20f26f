export * from "./protocol/host-report";
export * from "./agent/host-agent";
export { AGENT_VERSION } from "./version";
export { SqsReportSink } from "./adapters/sqs-report-sink";
export { startAssignmentServer, type AssignmentServer } from "./adapters/assignment-server";
