#!/bin/sh
# Creates one login role and one database per service on the shared RDS instance. Idempotent:
# runs on every install and upgrade, and re-applies each role's password from Secrets Manager.
# Connection: PGHOST/PGPORT/PGUSER/PGPASSWORD/PGSSLMODE; DATABASES="<db>:<ENV_PREFIX> ...";
# each service's password in <ENV_PREFIX>_DB_PASSWORD.
set -eu

for spec in $DATABASES; do
  db=${spec%%:*}
  prefix=${spec#*:}
  eval "pw=\${${prefix}_DB_PASSWORD}"
  echo "db-bootstrap: ensuring role and database ${db}"
  psql -v ON_ERROR_STOP=1 -v db="$db" -v pw="$pw" -d postgres <<'SQL'
SELECT format('CREATE ROLE %I LOGIN', :'db') WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'db')\gexec
ALTER ROLE :"db" WITH LOGIN PASSWORD :'pw';
-- The RDS master is not a superuser: it needs membership in the role to make it a database owner.
GRANT :"db" TO CURRENT_USER;
SELECT format('CREATE DATABASE %I OWNER %I', :'db', :'db') WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = :'db')\gexec
REVOKE ALL ON DATABASE :"db" FROM PUBLIC;
SQL
done
echo "db-bootstrap: done"
