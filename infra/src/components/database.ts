import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import * as random from "@pulumi/random";
import type { DatabaseConfig } from "../config";
import { fail, integerIn, matching } from "../config-checks";

export interface DatabaseArgs extends DatabaseConfig {
  identifier: string;
  vpcId: pulumi.Input<string>;
  subnetIds: pulumi.Input<string>[];
  /** Only these security groups (the cluster's nodes) may connect. */
  clientSecurityGroupIds: pulumi.Input<string>[];
  /** One database and login role per entry: service name -> database name. */
  databases: Record<string, string>;
  /** Secrets Manager name prefix, e.g. cgs-prod. */
  secretPrefix: string;
  tags: Record<string, string>;
}

export interface DatabaseCredentials {
  database: string;
  /** Secrets Manager entry: {username, password, host, port, dbname, url}. */
  secretArn: pulumi.Output<string>;
}

/** PostgreSQL's own and RDS's reserved roles and databases. */
const RESERVED = new Set(["postgres", "rdsadmin", "rds_superuser", "template0", "template1", "cgs_admin"]);

function validateDatabase(args: DatabaseArgs): void {
  matching(
    "cgs:database.engineVersion",
    args.engineVersion,
    /^\d{2}(\.\d+)?$/,
    'a PostgreSQL version such as "16" or "16.4"',
  );
  matching(
    "cgs:database.instanceClass",
    args.instanceClass,
    /^db\.[a-z0-9]+\.[a-z0-9]+$/,
    "an RDS class such as db.t4g.medium",
  );
  // gp3 storage starts at 20 GiB; autoscaling needs a ceiling at or above the allocation.
  integerIn("cgs:database.allocatedStorageGiB", args.allocatedStorageGiB, 20, 65_536);
  integerIn(
    "cgs:database.maxAllocatedStorageGiB",
    args.maxAllocatedStorageGiB,
    args.allocatedStorageGiB,
    65_536,
  );
  integerIn("cgs:database.backupRetentionDays", args.backupRetentionDays, 0, 35);
  for (const key of ["multiAz", "deletionProtection", "performanceInsights"] as const) {
    if (typeof args[key] !== "boolean")
      fail(`cgs:database.${key} must be true or false (got ${JSON.stringify(args[key])})`);
  }
  for (const [service, database] of Object.entries(args.databases)) {
    // The name is also the login role and appears unquoted in the connection URL.
    matching(
      `database of ${service}`,
      database,
      /^[a-z_][a-z0-9_]{0,62}$/,
      "a lowercase PostgreSQL identifier",
    );
    if (RESERVED.has(database)) fail(`database of ${service}: ${database} is reserved by PostgreSQL or RDS`);
  }
}

/**
 * PostgreSQL on RDS: encrypted, TLS enforced, Multi-AZ and backups as configured; the master
 * password lives in an RDS-managed secret and each service gets its own role and database.
 */
export class Database extends pulumi.ComponentResource {
  readonly address: pulumi.Output<string>;
  readonly port: pulumi.Output<number>;
  readonly masterSecretArn: pulumi.Output<string>;
  readonly credentials: Record<string, DatabaseCredentials>;

  constructor(name: string, args: DatabaseArgs, opts?: pulumi.ComponentResourceOptions) {
    super("cgs:infra:Database", name, {}, opts);
    validateDatabase(args);
    const parent = { parent: this };

    const sg = new aws.ec2.SecurityGroup(
      `${name}-sg`,
      {
        vpcId: args.vpcId,
        description: "PostgreSQL from the cluster nodes only",
        ingress: [
          {
            protocol: "tcp",
            fromPort: 5432,
            toPort: 5432,
            securityGroups: args.clientSecurityGroupIds,
            description: "EKS nodes",
          },
        ],
        tags: { ...args.tags, Name: `${args.identifier}-db` },
      },
      parent,
    );
    const subnets = new aws.rds.SubnetGroup(
      `${name}-subnets`,
      { subnetIds: args.subnetIds, tags: args.tags },
      parent,
    );
    const major = args.engineVersion.split(".")[0];
    const params = new aws.rds.ParameterGroup(
      `${name}-params`,
      {
        family: `postgres${major}`,
        parameters: [
          { name: "rds.force_ssl", value: "1" },
          { name: "log_min_duration_statement", value: "500" },
        ],
        tags: args.tags,
      },
      parent,
    );

    const instance = new aws.rds.Instance(
      name,
      {
        identifier: args.identifier,
        engine: "postgres",
        engineVersion: args.engineVersion,
        autoMinorVersionUpgrade: true,
        instanceClass: args.instanceClass,
        allocatedStorage: args.allocatedStorageGiB,
        maxAllocatedStorage: args.maxAllocatedStorageGiB,
        storageType: "gp3",
        storageEncrypted: true,
        multiAz: args.multiAz,
        dbSubnetGroupName: subnets.name,
        vpcSecurityGroupIds: [sg.id],
        parameterGroupName: params.name,
        publiclyAccessible: false,
        username: "cgs_admin",
        manageMasterUserPassword: true,
        backupRetentionPeriod: args.backupRetentionDays,
        backupWindow: "02:00-03:00",
        maintenanceWindow: "sun:03:30-sun:04:30",
        copyTagsToSnapshot: true,
        deletionProtection: args.deletionProtection,
        skipFinalSnapshot: !args.deletionProtection,
        finalSnapshotIdentifier: `${args.identifier}-final`,
        performanceInsightsEnabled: args.performanceInsights,
        enabledCloudwatchLogsExports: ["postgresql"],
        tags: args.tags,
      },
      parent,
    );

    this.credentials = {};
    for (const [service, database] of Object.entries(args.databases)) {
      const password = new random.RandomPassword(
        `${name}-${service}`,
        { length: 32, special: false },
        parent,
      );
      const secret = new aws.secretsmanager.Secret(
        `${name}-${service}`,
        {
          name: `${args.secretPrefix}/${service}/database`,
          description: `PostgreSQL credentials of ${service} (database ${database})`,
          recoveryWindowInDays: 7,
          tags: { ...args.tags, "cgs:service": service },
        },
        parent,
      );
      new aws.secretsmanager.SecretVersion(
        `${name}-${service}`,
        {
          secretId: secret.id,
          secretString: pulumi.jsonStringify({
            username: database,
            password: password.result,
            host: instance.address,
            port: instance.port,
            dbname: database,
            // verify-full: the images trust the RDS CA bundle (NODE_EXTRA_CA_CERTS).
            url: pulumi.interpolate`postgres://${database}:${password.result}@${instance.address}:${instance.port}/${database}?sslmode=verify-full`,
          }),
        },
        parent,
      );
      this.credentials[service] = { database, secretArn: secret.arn };
    }

    this.address = instance.address;
    this.port = instance.port;
    this.masterSecretArn = instance.masterUserSecrets.apply((s) => s[0]?.secretArn ?? "");
    this.registerOutputs({ address: this.address, port: this.port });
  }
}
