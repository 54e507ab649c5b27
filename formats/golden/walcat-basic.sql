-- The fixed workload behind walcat-basic.pgcs: run on a fresh database
-- with a slot created first, then `pg-walcat --endpos now`. The stream,
-- with identifiers of the run masked (see test/pg-walcat.bats), must equal
-- walcat-basic.pgcs byte for byte.
CREATE TYPE status AS ENUM ('new', 'paid', 'shipped');
CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, email text UNIQUE);
CREATE TABLE orders (
	id bigserial PRIMARY KEY,
	customer int REFERENCES customers,
	status status NOT NULL DEFAULT 'new',
	total numeric(10,2),
	note text,
	tags text[]
);
CREATE TABLE audit (at_id int, what text);
ALTER TABLE audit REPLICA IDENTITY FULL;
CREATE PUBLICATION golden FOR ALL TABLES;

INSERT INTO customers VALUES (1, 'Ada', 'ada@example.com'), (2, E'Bob\tTab', NULL), (3, E'C\\D', '');
BEGIN;
INSERT INTO orders (customer, total, note, tags) VALUES (1, 10.50, E'line1\nline2', '{a,b}');
INSERT INTO orders (customer, total, note, tags) VALUES (2, NULL, '\N', '{}');
INSERT INTO audit VALUES (1, 'two orders');
SELECT pg_logical_emit_message(true, 'app', 'batch 1');
COMMIT;
UPDATE orders SET status = 'paid' WHERE id = 1;
UPDATE customers SET id = 4 WHERE id = 3;
UPDATE audit SET what = 'changed';
DELETE FROM audit;
DELETE FROM orders WHERE id = 2;
SELECT pg_logical_emit_message(false, 'app', 'outside');
ALTER TABLE customers ADD COLUMN vip boolean DEFAULT false;
UPDATE customers SET vip = true WHERE id = 1;
TRUNCATE audit;
BEGIN;
INSERT INTO customers VALUES (5, 'Eve', 'eve@example.com', NULL);
SAVEPOINT s;
INSERT INTO customers VALUES (6, 'rolled back', NULL, NULL);
ROLLBACK TO s;
COMMIT;
BEGIN;
INSERT INTO customers VALUES (7, 'aborted', NULL, NULL);
ROLLBACK;
TRUNCATE orders, customers RESTART IDENTITY;
