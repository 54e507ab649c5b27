-- The conformance suite's cases (test/conformance.bats, test/lib/conformance.bash
-- describes the format). Each case's tables live in schemas named after it.
-- The oracle is PostgreSQL's own subscription to the same publications.

-- case 01 14 | p01a, p01b
-- Two FOR TABLE publications with different tables: the union is copied.
-- @schema
CREATE SCHEMA c01;
CREATE TABLE c01.a (id int PRIMARY KEY, v text);
CREATE TABLE c01.b (id bigint PRIMARY KEY, n numeric, d date);
CREATE TABLE c01.unpublished (id int PRIMARY KEY);
-- @source
INSERT INTO c01.a SELECT g, 'a' || g FROM generate_series(1, 50) g;
INSERT INTO c01.b SELECT g, g / 3.0, date '2024-01-01' + g FROM generate_series(1, 50) g;
INSERT INTO c01.unpublished SELECT generate_series(1, 5);
CREATE PUBLICATION p01a FOR TABLE c01.a;
CREATE PUBLICATION p01b FOR TABLE c01.b;
-- @work
INSERT INTO c01.a SELECT g, 'new' FROM generate_series(51, 60) g;
UPDATE c01.a SET v = v || '!' WHERE id % 7 = 0;
DELETE FROM c01.b WHERE id % 5 = 0;
UPDATE c01.b SET id = id + 1000 WHERE id < 4;
INSERT INTO c01.unpublished VALUES (6);

-- case 02 14 | p02a, p02b
-- A table both publications publish is copied and streamed once.
-- @schema
CREATE SCHEMA c02;
CREATE TABLE c02.shared (id int PRIMARY KEY, v text);
CREATE TABLE c02.only_a (id int PRIMARY KEY);
CREATE TABLE c02.only_b (id int PRIMARY KEY);
-- @source
INSERT INTO c02.shared SELECT g, 's' || g FROM generate_series(1, 40) g;
INSERT INTO c02.only_a SELECT generate_series(1, 3);
INSERT INTO c02.only_b SELECT generate_series(1, 4);
CREATE PUBLICATION p02a FOR TABLE c02.shared, c02.only_a;
CREATE PUBLICATION p02b FOR TABLE c02.shared, c02.only_b;
-- @work
INSERT INTO c02.shared SELECT g, 'n' FROM generate_series(41, 45) g;
UPDATE c02.shared SET v = 'u' WHERE id < 10;
DELETE FROM c02.shared WHERE id > 43;
INSERT INTO c02.only_b VALUES (5);

-- case 03 14 | p03ins, p03all
-- publish = 'insert': the copy has the table, the stream only its inserts.
-- @schema
CREATE SCHEMA c03;
CREATE TABLE c03.ins (id int PRIMARY KEY, v text);
CREATE TABLE c03.allops (id int PRIMARY KEY, v text);
-- @source
INSERT INTO c03.ins SELECT g, 'i' || g FROM generate_series(1, 20) g;
INSERT INTO c03.allops SELECT g, 'a' || g FROM generate_series(1, 20) g;
CREATE PUBLICATION p03ins FOR TABLE c03.ins WITH (publish = 'insert');
CREATE PUBLICATION p03all FOR TABLE c03.allops;
-- @work
INSERT INTO c03.ins VALUES (21, 'new');
UPDATE c03.ins SET v = 'changed' WHERE id < 5;
DELETE FROM c03.ins WHERE id > 15;
TRUNCATE c03.ins;
INSERT INTO c03.ins VALUES (100, 'after truncate');
UPDATE c03.allops SET v = 'changed' WHERE id < 5;
DELETE FROM c03.allops WHERE id > 15;

-- case 04 14 | p04t, p04n
-- TRUNCATE of several tables at once, only some published with truncate.
-- @schema
CREATE SCHEMA c04;
CREATE TABLE c04.t_trunc (id int PRIMARY KEY);
CREATE TABLE c04.t_notrunc (id int PRIMARY KEY);
CREATE TABLE c04.t_unpub (id int PRIMARY KEY);
CREATE TABLE c04.t_keep (id int PRIMARY KEY);
-- @source
INSERT INTO c04.t_trunc SELECT generate_series(1, 10);
INSERT INTO c04.t_notrunc SELECT generate_series(1, 10);
INSERT INTO c04.t_unpub SELECT generate_series(1, 10);
INSERT INTO c04.t_keep SELECT generate_series(1, 10);
CREATE PUBLICATION p04t FOR TABLE c04.t_trunc, c04.t_keep;
CREATE PUBLICATION p04n FOR TABLE c04.t_notrunc WITH (publish = 'insert, update, delete');
-- @work
TRUNCATE c04.t_trunc, c04.t_notrunc, c04.t_unpub;
INSERT INTO c04.t_trunc VALUES (100);
INSERT INTO c04.t_notrunc VALUES (100);
INSERT INTO c04.t_keep VALUES (100);

-- case 05 14 | p05a, p05b
-- Inheritance: a parent published with its children (each under its own
-- name) and a parent published ONLY.
-- @schema
CREATE SCHEMA c05;
CREATE TABLE c05.parent (id int PRIMARY KEY, v text);
CREATE TABLE c05.child (extra int) INHERITS (c05.parent);
ALTER TABLE c05.child ADD PRIMARY KEY (id);
CREATE TABLE c05.solo (id int PRIMARY KEY, v text);
CREATE TABLE c05.solo_child () INHERITS (c05.solo);
ALTER TABLE c05.solo_child ADD PRIMARY KEY (id);
-- @source
INSERT INTO c05.parent SELECT g, 'p' FROM generate_series(1, 10) g;
INSERT INTO c05.child SELECT g, 'c', g FROM generate_series(11, 20) g;
INSERT INTO c05.solo SELECT g, 's' FROM generate_series(1, 10) g;
INSERT INTO c05.solo_child SELECT g, 'sc' FROM generate_series(11, 20) g;
CREATE PUBLICATION p05a FOR TABLE c05.parent;
CREATE PUBLICATION p05b FOR TABLE ONLY c05.solo;
-- @work
INSERT INTO c05.child VALUES (21, 'c', 21);
UPDATE c05.parent SET v = 'up';
DELETE FROM c05.child WHERE id = 12;
INSERT INTO c05.solo_child VALUES (21, 'sc');
UPDATE c05.solo SET v = 'up';

-- case 06 14 | p06a, p06b
-- A stored generated column is not published by default: the target
-- computes it.
-- @schema
CREATE SCHEMA c06;
CREATE TABLE c06.g (id int PRIMARY KEY, price int, doubled int GENERATED ALWAYS AS (price * 2) STORED, note text);
CREATE TABLE c06.plain (id int PRIMARY KEY);
-- @source
INSERT INTO c06.g (id, price, note) SELECT g, g, 'n' FROM generate_series(1, 20) g;
INSERT INTO c06.plain SELECT generate_series(1, 3);
CREATE PUBLICATION p06a FOR TABLE c06.g;
CREATE PUBLICATION p06b FOR TABLE c06.plain, c06.g;
-- @work
INSERT INTO c06.g (id, price, note) VALUES (21, 100, 'new');
UPDATE c06.g SET price = price + 1 WHERE id < 5;
DELETE FROM c06.g WHERE id = 20;

-- case 07 14 | p07root, p07leaf
-- oracle-before 16 PostgreSQL 14 and 15's own initial sync copies a partition that one publication names while another publishes its root via the root twice (under the root and under its own name; 16 fixed it): the expected result is each source row once
-- publish_via_partition_root on the root and a publication naming a leaf:
-- the leaf's rows once, under the root.
-- @schema
CREATE SCHEMA c07;
CREATE TABLE c07.m (id int, k int, v text, PRIMARY KEY (id, k)) PARTITION BY RANGE (k);
CREATE TABLE c07.m1 PARTITION OF c07.m FOR VALUES FROM (0) TO (10);
CREATE TABLE c07.m2 PARTITION OF c07.m FOR VALUES FROM (10) TO (20);
-- @source
INSERT INTO c07.m SELECT g, g % 20, 'v' FROM generate_series(1, 60) g;
CREATE PUBLICATION p07root FOR TABLE c07.m WITH (publish_via_partition_root = true);
CREATE PUBLICATION p07leaf FOR TABLE c07.m1;
-- @work
INSERT INTO c07.m VALUES (100, 5, 'new'), (101, 15, 'new');
UPDATE c07.m SET k = 12 WHERE id = 3;
UPDATE c07.m SET v = 'u' WHERE k = 4;
DELETE FROM c07.m WHERE id = 7;

-- case 08 15 | p08a, p08b
-- Two row filters on one table are OR-ed; updates move rows in and out.
-- @schema
CREATE SCHEMA c08;
CREATE TABLE c08.t (id int PRIMARY KEY, score int, v text);
ALTER TABLE c08.t REPLICA IDENTITY FULL;
-- @source
INSERT INTO c08.t SELECT g, g, 'v' || g FROM generate_series(1, 100) g;
CREATE PUBLICATION p08a FOR TABLE c08.t WHERE (score < 20);
CREATE PUBLICATION p08b FOR TABLE c08.t WHERE (score > 80);
-- @work
UPDATE c08.t SET score = 50 WHERE id IN (5, 90);
UPDATE c08.t SET score = 10 WHERE id IN (40, 41);
UPDATE c08.t SET score = 95 WHERE id = 42;
UPDATE c08.t SET v = 'touched' WHERE id IN (1, 50, 99);
DELETE FROM c08.t WHERE id IN (2, 51, 98);
INSERT INTO c08.t VALUES (101, 1, 'in'), (102, 50, 'out'), (103, 99, 'in');

-- case 09 15 | p09f, p09all
-- A row filter in one publication and none in the other: every row.
-- @schema
CREATE SCHEMA c09;
CREATE TABLE c09.t (id int PRIMARY KEY, flag bool);
-- @source
INSERT INTO c09.t SELECT g, g % 2 = 0 FROM generate_series(1, 30) g;
CREATE PUBLICATION p09f FOR TABLE c09.t WHERE (id < 5);
CREATE PUBLICATION p09all FOR TABLE c09.t;
-- @work
INSERT INTO c09.t VALUES (31, true), (32, false);
UPDATE c09.t SET id = id + 100 WHERE id < 3;
DELETE FROM c09.t WHERE id = 20;

-- case 10 15 | p10all, p10f
-- FOR ALL TABLES (no filter) overrides another publication's filter; it
-- covers a table created after it, before the snapshot.
-- @schema
CREATE SCHEMA c10;
CREATE TABLE c10.t (id int PRIMARY KEY, n int);
-- @source
CREATE PUBLICATION p10all FOR ALL TABLES;
CREATE TABLE c10.later (id int PRIMARY KEY);
INSERT INTO c10.t SELECT g, g FROM generate_series(1, 30) g;
INSERT INTO c10.later SELECT generate_series(1, 5);
ALTER TABLE c10.t REPLICA IDENTITY FULL;
CREATE PUBLICATION p10f FOR TABLE c10.t WHERE (n > 25);
-- @target
CREATE SCHEMA c10;
CREATE TABLE c10.t (id int PRIMARY KEY, n int);
CREATE TABLE c10.later (id int PRIMARY KEY);
-- @work
INSERT INTO c10.t VALUES (31, 1), (32, 100);
UPDATE c10.t SET n = 0 WHERE id = 30;
INSERT INTO c10.later VALUES (6);

-- case 11 15 | p11s, p11f
-- FOR TABLES IN SCHEMA has no filter and overrides a filter on a table in
-- that schema; a filtered table outside the schema keeps its filter.
-- @schema
CREATE SCHEMA c11;
CREATE SCHEMA c11b;
CREATE TABLE c11.t (id int PRIMARY KEY, n int);
CREATE TABLE c11.u (id int PRIMARY KEY);
CREATE TABLE c11b.f (id int PRIMARY KEY, n int);
-- @source
INSERT INTO c11.t SELECT g, g FROM generate_series(1, 20) g;
INSERT INTO c11.u SELECT generate_series(1, 5);
INSERT INTO c11b.f SELECT g, g FROM generate_series(1, 20) g;
CREATE PUBLICATION p11s FOR TABLES IN SCHEMA c11;
CREATE PUBLICATION p11f FOR TABLE c11.t WHERE (id > 15), c11b.f WHERE (id > 15);
-- @work
INSERT INTO c11.t VALUES (21, 1);
UPDATE c11.t SET n = -1 WHERE id < 4;
INSERT INTO c11b.f VALUES (21, 1), (2000, 2);
UPDATE c11b.f SET id = id + 100 WHERE id IN (16, 3);
DELETE FROM c11b.f WHERE id = 17;

-- case 12 15 | p12a, p12b
-- A partitioned table without publish_via_partition_root, with row filters
-- on its partitions: each partition's own filter; rows move between
-- partitions.
-- @schema
CREATE SCHEMA c12;
CREATE TABLE c12.m (id int, k int, v text, PRIMARY KEY (id, k)) PARTITION BY RANGE (k);
CREATE TABLE c12.m1 PARTITION OF c12.m FOR VALUES FROM (0) TO (10);
CREATE TABLE c12.m2 PARTITION OF c12.m FOR VALUES FROM (10) TO (20);
CREATE TABLE c12.m3 PARTITION OF c12.m FOR VALUES FROM (20) TO (30);
-- @source
INSERT INTO c12.m SELECT g, g % 30, 'v' FROM generate_series(1, 90) g;
CREATE PUBLICATION p12a FOR TABLE c12.m1 WHERE (id > 30), c12.m2 WHERE (id < 30);
CREATE PUBLICATION p12b FOR TABLE c12.m3 WHERE (id % 2 = 0);
-- @work
UPDATE c12.m SET k = 15 WHERE id = 31;
UPDATE c12.m SET k = 5 WHERE id = 11;
UPDATE c12.m SET k = 25 WHERE id IN (12, 33);
INSERT INTO c12.m VALUES (200, 1, 'n'), (2, 11, 'n'), (202, 21, 'n');
DELETE FROM c12.m WHERE id IN (40, 14, 24);

-- case 13 16 | p13r, p13l
-- A row filter on the root published via the root, and another on a leaf a
-- second publication names: the root's filter alone, under the root (15 is
-- case 07's double copy).
-- @schema
CREATE SCHEMA c13;
CREATE TABLE c13.m (id int, k int, v text, PRIMARY KEY (id, k)) PARTITION BY RANGE (k);
CREATE TABLE c13.m1 PARTITION OF c13.m FOR VALUES FROM (0) TO (10);
CREATE TABLE c13.m2 PARTITION OF c13.m FOR VALUES FROM (10) TO (20);
-- @source
INSERT INTO c13.m SELECT g, g % 20, 'v' FROM generate_series(1, 80) g;
CREATE PUBLICATION p13r FOR TABLE c13.m WHERE (id < 40) WITH (publish_via_partition_root = true);
CREATE PUBLICATION p13l FOR TABLE c13.m1 WHERE (id > 60);
-- @work
INSERT INTO c13.m VALUES (5, 15, 'in'), (165, 5, 'leaf filter only'), (150, 1, 'out');
UPDATE c13.m SET k = 3 WHERE id = 12;
DELETE FROM c13.m WHERE id = 21;

-- case 14 15 | p14s
-- FOR TABLES IN SCHEMA with publish_via_partition_root: a partitioned table
-- of the schema whose partitions are in another schema is published whole.
-- @schema
CREATE SCHEMA c14;
CREATE SCHEMA c14b;
CREATE TABLE c14.m (id int PRIMARY KEY, v text) PARTITION BY RANGE (id);
CREATE TABLE c14b.m1 PARTITION OF c14.m FOR VALUES FROM (0) TO (100);
CREATE TABLE c14b.m2 PARTITION OF c14.m FOR VALUES FROM (100) TO (200);
CREATE TABLE c14b.other (id int PRIMARY KEY);
-- @source
INSERT INTO c14.m SELECT g, 'v' FROM generate_series(1, 150) g;
INSERT INTO c14b.other SELECT generate_series(1, 3);
CREATE PUBLICATION p14s FOR TABLES IN SCHEMA c14 WITH (publish_via_partition_root = true);
-- @work
INSERT INTO c14.m VALUES (160, 'n'), (0, 'n');
UPDATE c14.m SET id = id + 190 WHERE id = 5;
DELETE FROM c14.m WHERE id = 120;
INSERT INTO c14b.other VALUES (4);

-- case 15 15 | p15s, p15o
-- FOR TABLES IN SCHEMA without publish_via_partition_root: the partitions in
-- the schema under their own names, not one in another schema.
-- @schema
CREATE SCHEMA c15;
CREATE SCHEMA c15b;
CREATE TABLE c15.m (id int PRIMARY KEY, v text) PARTITION BY RANGE (id);
CREATE TABLE c15b.m1 PARTITION OF c15.m FOR VALUES FROM (0) TO (100);
CREATE TABLE c15.m2 PARTITION OF c15.m FOR VALUES FROM (100) TO (200);
CREATE TABLE c15.o (id int PRIMARY KEY);
-- @source
INSERT INTO c15.m SELECT g, 'v' FROM generate_series(1, 150) g;
INSERT INTO c15.o SELECT generate_series(1, 3);
CREATE PUBLICATION p15s FOR TABLES IN SCHEMA c15b;
CREATE PUBLICATION p15o FOR TABLE c15.o;
-- @work
INSERT INTO c15.m VALUES (160, 'n'), (0, 'n');
UPDATE c15.m SET id = id + 190 WHERE id = 5;
UPDATE c15.m SET id = id - 100 WHERE id = 105;
DELETE FROM c15.m WHERE id IN (10, 120);

-- case 16 15 | p16a, p16b
-- The same column list in two publications.
-- @schema
CREATE SCHEMA c16;
CREATE TABLE c16.t (id int PRIMARY KEY, a text, secret text);
-- @source
INSERT INTO c16.t SELECT g, 'a' || g, 's' || g FROM generate_series(1, 20) g;
CREATE PUBLICATION p16a FOR TABLE c16.t (id, a);
CREATE PUBLICATION p16b FOR TABLE c16.t (id, a);
-- @work
INSERT INTO c16.t VALUES (21, 'a', 's');
UPDATE c16.t SET secret = 'changed' WHERE id < 5;
UPDATE c16.t SET a = 'changed' WHERE id > 15;
DELETE FROM c16.t WHERE id = 10;

-- case 17 15 | p17c, p17o
-- A column list in one publication, another table in the other: only the
-- listed columns are copied and streamed.
-- @schema
CREATE SCHEMA c17;
CREATE TABLE c17.t (id int PRIMARY KEY, a text, b int, c jsonb);
CREATE TABLE c17.o (id int PRIMARY KEY, x text);
-- @source
INSERT INTO c17.t SELECT g, 'a', g, '{"k": 1}' FROM generate_series(1, 20) g;
INSERT INTO c17.o SELECT g, 'x' FROM generate_series(1, 5) g;
CREATE PUBLICATION p17c FOR TABLE c17.t (c, id);
CREATE PUBLICATION p17o FOR TABLE c17.o;
-- @work
UPDATE c17.t SET a = 'unlisted' WHERE id < 10;
UPDATE c17.t SET c = '{"k": 2}' WHERE id > 10;
INSERT INTO c17.t VALUES (21, 'a', 21, '[]');
DELETE FROM c17.t WHERE id = 3;
UPDATE c17.o SET x = 'y';

-- case 18 15 | p18
-- A column list and a row filter on one table.
-- @schema
CREATE SCHEMA c18;
CREATE TABLE c18.t (id int, region text, amount int, hidden text, PRIMARY KEY (id, region));
-- @source
INSERT INTO c18.t SELECT g, CASE WHEN g % 2 = 0 THEN 'eu' ELSE 'us' END, g, 'h' FROM generate_series(1, 40) g;
CREATE PUBLICATION p18 FOR TABLE c18.t (id, region, amount, hidden) WHERE (region = 'eu');
ALTER PUBLICATION p18 SET TABLE c18.t (id, region, amount) WHERE (region = 'eu');
-- @work
UPDATE c18.t SET region = 'us' WHERE id = 2;
UPDATE c18.t SET region = 'eu' WHERE id = 3;
UPDATE c18.t SET amount = -1 WHERE id = 4;
INSERT INTO c18.t VALUES (41, 'eu', 1, 'h'), (42, 'us', 2, 'h');
DELETE FROM c18.t WHERE id IN (6, 7);

-- case 19 15 | p19a, p19b
-- error cannot use different column lists for table "c19.t" in different publications
-- Different column lists for one table: refused, as CREATE SUBSCRIPTION
-- refuses them.
-- @schema
CREATE SCHEMA c19;
CREATE TABLE c19.t (id int PRIMARY KEY, a text, b text);
-- @source
INSERT INTO c19.t VALUES (1, 'a', 'b');
CREATE PUBLICATION p19a FOR TABLE c19.t (id, a);
CREATE PUBLICATION p19b FOR TABLE c19.t (id, b);
-- @work
INSERT INTO c19.t VALUES (2, 'a', 'b');

-- case 20 15 | p20l, p20n
-- error-before 16 cannot use different column lists for table "c20.t" in different publications
-- A dropped column: a column list naming every live column and a
-- publication without a list are different lists on 15 (its initial sync
-- and pgoutput refuse them) and the same from 16.
-- @schema
CREATE SCHEMA c20;
CREATE TABLE c20.t (id int PRIMARY KEY, gone text, a text);
ALTER TABLE c20.t DROP COLUMN gone;
-- @source
INSERT INTO c20.t SELECT g, 'a' || g FROM generate_series(1, 10) g;
CREATE PUBLICATION p20l FOR TABLE c20.t (id, a);
CREATE PUBLICATION p20n FOR TABLE c20.t;
-- @target
CREATE SCHEMA c20;
CREATE TABLE c20.t (id int PRIMARY KEY, a text);
-- @work
INSERT INTO c20.t VALUES (11, 'n');
UPDATE c20.t SET a = 'u' WHERE id < 3;

-- case 21 15 | p21
-- TOAST values in the filter column (replica identity FULL): updates of
-- other columns leave them unchanged, others move rows in and out.
-- @schema
CREATE SCHEMA c21;
CREATE TABLE c21.doc (id int PRIMARY KEY, body text, n int);
ALTER TABLE c21.doc REPLICA IDENTITY FULL;
ALTER TABLE c21.doc ALTER COLUMN body SET STORAGE EXTERNAL;
-- @source
INSERT INTO c21.doc SELECT g, CASE WHEN g % 2 = 0 THEN 'keep' ELSE 'drop' END || repeat(md5(g::text), 400), g
  FROM generate_series(1, 20) g;
CREATE PUBLICATION p21 FOR TABLE c21.doc WHERE (left(body, 4) = 'keep');
-- @work
UPDATE c21.doc SET n = n + 100 WHERE id IN (2, 3);
UPDATE c21.doc SET body = 'drop' || repeat('x', 9000) WHERE id = 4;
UPDATE c21.doc SET body = 'keep' || repeat('y', 9000) WHERE id = 5;
INSERT INTO c21.doc VALUES (21, 'keep' || repeat('z', 9000), 1), (22, 'drop' || repeat('z', 9000), 1);
DELETE FROM c21.doc WHERE id IN (6, 7);

-- case 22 15 | p22
-- Replica identity FULL without a key, with a row filter.
-- @schema
CREATE SCHEMA c22;
CREATE TABLE c22.log (at int, who text, what text);
ALTER TABLE c22.log REPLICA IDENTITY FULL;
-- @source
INSERT INTO c22.log SELECT g, 'u' || (g % 3), 'w' || g FROM generate_series(1, 30) g;
CREATE PUBLICATION p22 FOR TABLE c22.log WHERE (who <> 'u0');
-- @work
UPDATE c22.log SET what = 'changed' WHERE at < 5;
UPDATE c22.log SET who = 'u0' WHERE at = 7;
UPDATE c22.log SET who = 'u1' WHERE at = 9;
DELETE FROM c22.log WHERE at IN (10, 11);
INSERT INTO c22.log VALUES (31, 'u0', 'x'), (32, 'u2', 'y');

-- case 23 15 | p23
-- Key changes through a row filter on the key: rows leave and enter it.
-- @schema
CREATE SCHEMA c23;
CREATE TABLE c23.t (id int PRIMARY KEY, v text);
-- @source
INSERT INTO c23.t SELECT g, 'v' || g FROM generate_series(1, 50) g;
CREATE PUBLICATION p23 FOR TABLE c23.t WHERE (id < 30);
-- @work
UPDATE c23.t SET id = 150 WHERE id = 5;
UPDATE c23.t SET id = 5 WHERE id = 40;
UPDATE c23.t SET id = -3 WHERE id = 26;
UPDATE c23.t SET id = id + 1000 WHERE id > 45;
DELETE FROM c23.t WHERE id = 8;

-- case 24 15 | p24s, p24f, p24c
-- Three publications, one of each kind (schema, row filters, column list),
-- tables with capitals and serial keys.
-- @schema
CREATE SCHEMA c24;
CREATE SCHEMA "c24Sales";
CREATE TABLE c24."Customers" (id serial PRIMARY KEY, "Name" text);
CREATE TABLE "c24Sales"."Orders" (id bigserial PRIMARY KEY, "Region" text NOT NULL, total numeric);
ALTER TABLE "c24Sales"."Orders" REPLICA IDENTITY FULL;
CREATE TABLE "c24Sales"."Notes" (id serial PRIMARY KEY, body text, internal text);
-- @source
INSERT INTO c24."Customers" ("Name") SELECT 'c' || g FROM generate_series(1, 10) g;
INSERT INTO "c24Sales"."Orders" ("Region", total) SELECT CASE WHEN g % 3 = 0 THEN 'EU' ELSE 'US' END, g FROM generate_series(1, 30) g;
INSERT INTO "c24Sales"."Notes" (body, internal) SELECT 'b' || g, 'i' FROM generate_series(1, 10) g;
CREATE PUBLICATION p24s FOR TABLES IN SCHEMA c24;
CREATE PUBLICATION p24f FOR TABLE "c24Sales"."Orders" WHERE ("Region" = 'EU' OR total > 25);
CREATE PUBLICATION p24c FOR TABLE "c24Sales"."Notes" (id, body);
-- @work
INSERT INTO c24."Customers" ("Name") VALUES ('new');
INSERT INTO "c24Sales"."Orders" ("Region", total) VALUES ('EU', 1), ('US', 2), ('US', 100);
UPDATE "c24Sales"."Orders" SET "Region" = 'US' WHERE id = 3;
UPDATE "c24Sales"."Orders" SET "Region" = 'EU' WHERE id = 4;
UPDATE "c24Sales"."Notes" SET internal = 'x', body = 'y' WHERE id < 3;
DELETE FROM c24."Customers" WHERE id = 2;

-- case 25 14 | p25
-- FOR ALL TABLES with publish_via_partition_root: partitioned tables whole,
-- plain tables, one created after the publication.
-- @schema
CREATE SCHEMA c25;
CREATE TABLE c25.m (id int PRIMARY KEY, v text) PARTITION BY LIST (id);
CREATE TABLE c25.m_odd PARTITION OF c25.m FOR VALUES IN (1, 3, 5, 7, 9);
CREATE TABLE c25.m_rest PARTITION OF c25.m DEFAULT;
-- @source
CREATE PUBLICATION p25 FOR ALL TABLES WITH (publish_via_partition_root = true);
CREATE TABLE c25.plain (id int PRIMARY KEY);
INSERT INTO c25.m SELECT g, 'v' FROM generate_series(1, 20) g;
INSERT INTO c25.plain SELECT generate_series(1, 4);
-- @target
CREATE SCHEMA c25;
CREATE TABLE c25.m (id int PRIMARY KEY, v text) PARTITION BY LIST (id);
CREATE TABLE c25.m_odd PARTITION OF c25.m FOR VALUES IN (1, 3, 5, 7, 9);
CREATE TABLE c25.m_rest PARTITION OF c25.m DEFAULT;
CREATE TABLE c25.plain (id int PRIMARY KEY);
-- @work
UPDATE c25.m SET id = 30 WHERE id = 3;
DELETE FROM c25.m WHERE id = 7;
UPDATE c25.m SET id = 7 WHERE id = 10;
INSERT INTO c25.m VALUES (21, 'n');
INSERT INTO c25.plain VALUES (5);
TRUNCATE c25.m;
INSERT INTO c25.m VALUES (1, 'after');

-- case 26 16 | p26r, p26l
-- A row filter on a root published via the root, the leaf named without a
-- filter by another publication: the root's publication decides.
-- @schema
CREATE SCHEMA c26;
CREATE TABLE c26.m (id int PRIMARY KEY, v text) PARTITION BY RANGE (id);
CREATE TABLE c26.m1 PARTITION OF c26.m FOR VALUES FROM (0) TO (50);
CREATE TABLE c26.m2 PARTITION OF c26.m FOR VALUES FROM (50) TO (100);
-- @source
INSERT INTO c26.m SELECT g, 'v' FROM generate_series(1, 99) g;
CREATE PUBLICATION p26r FOR TABLE c26.m WHERE (id % 3 = 0) WITH (publish_via_partition_root = true);
CREATE PUBLICATION p26l FOR TABLE c26.m1;
-- @work
INSERT INTO c26.m VALUES (0, 'n'), (1, 'n') ON CONFLICT DO NOTHING;
UPDATE c26.m SET v = 'u' WHERE id < 10;
DELETE FROM c26.m WHERE id IN (12, 13, 60);

-- case 27 15 | p27r, p27l
-- Without publish_via_partition_root: a publication of the root (which may
-- have no filter) and one naming a leaf with a filter leave that leaf
-- unfiltered; leaves named with and without a filter.
-- @schema
CREATE SCHEMA c27;
CREATE TABLE c27.m (id int PRIMARY KEY, v text) PARTITION BY RANGE (id);
CREATE TABLE c27.m1 PARTITION OF c27.m FOR VALUES FROM (0) TO (50);
CREATE TABLE c27.m2 PARTITION OF c27.m FOR VALUES FROM (50) TO (100);
CREATE TABLE c27.x (id int PRIMARY KEY, v text) PARTITION BY RANGE (id);
CREATE TABLE c27.x1 PARTITION OF c27.x FOR VALUES FROM (0) TO (50);
CREATE TABLE c27.x2 PARTITION OF c27.x FOR VALUES FROM (50) TO (100);
-- @source
INSERT INTO c27.m SELECT g, 'v' FROM generate_series(1, 99) g;
INSERT INTO c27.x SELECT g, 'v' FROM generate_series(1, 99) g;
CREATE PUBLICATION p27r FOR TABLE c27.m;
CREATE PUBLICATION p27l FOR TABLE c27.m1 WHERE (id > 90), c27.x1 WHERE (id % 5 = 0), c27.x2;
-- @work
INSERT INTO c27.m VALUES (0, 'n');
UPDATE c27.m SET v = 'u' WHERE id IN (10, 60);
INSERT INTO c27.x VALUES (0, 'n');
UPDATE c27.x SET v = 'u' WHERE id IN (10, 11, 60);
DELETE FROM c27.x WHERE id IN (20, 21, 70);

-- case 28 14 | p28
-- Capitals, spaces and serial keys in the names.
-- @schema
CREATE SCHEMA "c28";
CREATE TABLE "c28"."Order Lines" ("Id" serial PRIMARY KEY, "Qty" int, "Sku" text);
CREATE TABLE "c28"."ALLCAPS" (id bigserial PRIMARY KEY, "Value" text);
-- @source
INSERT INTO "c28"."Order Lines" ("Qty", "Sku") SELECT g, 's' || g FROM generate_series(1, 20) g;
INSERT INTO "c28"."ALLCAPS" ("Value") SELECT 'v' || g FROM generate_series(1, 5) g;
CREATE PUBLICATION p28 FOR TABLE "c28"."Order Lines", "c28"."ALLCAPS";
-- @work
INSERT INTO "c28"."Order Lines" ("Qty", "Sku") VALUES (100, 'new');
UPDATE "c28"."Order Lines" SET "Qty" = 0 WHERE "Id" < 3;
DELETE FROM "c28"."ALLCAPS" WHERE id = 1;

-- case 29 15 | p29ins, p29upd
-- Row filters per kind of change: one publication publishes inserts of
-- some rows, the other updates and deletes of others.
-- @schema
CREATE SCHEMA c29;
CREATE TABLE c29.t (id int PRIMARY KEY, x int);
ALTER TABLE c29.t REPLICA IDENTITY FULL;
-- @source
INSERT INTO c29.t SELECT g, g FROM generate_series(1, 20) g;
CREATE PUBLICATION p29ins FOR TABLE c29.t WHERE (x > 15) WITH (publish = 'insert');
CREATE PUBLICATION p29upd FOR TABLE c29.t WHERE (x < 5) WITH (publish = 'update, delete');
-- @work
INSERT INTO c29.t VALUES (21, 21), (22, 2), (23, 10);
UPDATE c29.t SET x = x + 1 WHERE id IN (1, 2, 17);
UPDATE c29.t SET x = 3 WHERE id = 10;
DELETE FROM c29.t WHERE id IN (3, 18);

-- case 30 14 | p30
-- TRUNCATE of a partitioned table published via the root, and of one of
-- its leaves, which pgoutput leaves out (it publishes the root only).
-- @schema
CREATE SCHEMA c30;
CREATE TABLE c30.m (id int PRIMARY KEY, v text) PARTITION BY RANGE (id);
CREATE TABLE c30.m1 PARTITION OF c30.m FOR VALUES FROM (0) TO (50);
CREATE TABLE c30.m2 PARTITION OF c30.m FOR VALUES FROM (50) TO (100);
-- @source
INSERT INTO c30.m SELECT g, 'v' FROM generate_series(1, 99) g;
CREATE PUBLICATION p30 FOR TABLE c30.m WITH (publish_via_partition_root = true);
-- @work
TRUNCATE c30.m2;
INSERT INTO c30.m VALUES (0, 'm1');
TRUNCATE c30.m;
INSERT INTO c30.m VALUES (60, 'after'), (1, 'after');
UPDATE c30.m SET id = 61 WHERE id = 1;

-- case 31 18 | p31
-- publish_generated_columns = stored: the generated column is copied and
-- streamed (into a plain column on the target).
-- @schema
CREATE SCHEMA c31;
CREATE TABLE c31.g (id int PRIMARY KEY, price int, doubled int GENERATED ALWAYS AS (price * 2) STORED);
-- @source
INSERT INTO c31.g (id, price) SELECT g, g FROM generate_series(1, 10) g;
CREATE PUBLICATION p31 FOR TABLE c31.g WITH (publish_generated_columns = stored);
-- @target
CREATE SCHEMA c31;
CREATE TABLE c31.g (id int PRIMARY KEY, price int, doubled int);
-- @work
INSERT INTO c31.g (id, price) VALUES (11, 50);
UPDATE c31.g SET price = 0 WHERE id < 3;

-- case 32 18 | p32, p32o
-- A generated column named in a column list (18) is published.
-- @schema
CREATE SCHEMA c32;
CREATE TABLE c32.g (id int PRIMARY KEY, price int, secret text, doubled int GENERATED ALWAYS AS (price * 2) STORED);
CREATE TABLE c32.o (id int PRIMARY KEY);
-- @source
INSERT INTO c32.g (id, price, secret) SELECT g, g, 's' FROM generate_series(1, 10) g;
INSERT INTO c32.o VALUES (1);
CREATE PUBLICATION p32 FOR TABLE c32.g (id, doubled);
CREATE PUBLICATION p32o FOR TABLE c32.o;
-- @target
CREATE SCHEMA c32;
CREATE TABLE c32.g (id int PRIMARY KEY, price int, secret text, doubled int);
CREATE TABLE c32.o (id int PRIMARY KEY);
-- @work
INSERT INTO c32.g (id, price, secret) VALUES (11, 50, 's');
UPDATE c32.g SET price = 0 WHERE id < 3;

-- case 33 15 | p33a, p33b
-- Dropped columns, with a column list and without one, on two tables.
-- @schema
CREATE SCHEMA c33;
CREATE TABLE c33.l (id int PRIMARY KEY, x text, a text, b text);
ALTER TABLE c33.l DROP COLUMN x;
CREATE TABLE c33.n (id int PRIMARY KEY, x text, a text);
ALTER TABLE c33.n DROP COLUMN x;
-- @source
INSERT INTO c33.l SELECT g, 'a', 'b' FROM generate_series(1, 10) g;
INSERT INTO c33.n SELECT g, 'a' FROM generate_series(1, 10) g;
CREATE PUBLICATION p33a FOR TABLE c33.l (id, b);
CREATE PUBLICATION p33b FOR TABLE c33.n;
-- @target
CREATE SCHEMA c33;
CREATE TABLE c33.l (id int PRIMARY KEY, a text, b text);
CREATE TABLE c33.n (id int PRIMARY KEY, a text);
-- @work
INSERT INTO c33.l VALUES (11, 'a', 'b');
UPDATE c33.l SET a = 'unlisted', b = 'listed' WHERE id < 3;
UPDATE c33.n SET a = 'u' WHERE id < 3;

-- case 34 14 | p34mid, p34root, p34leaf
-- oracle-before 16 PostgreSQL 14 and 15's own initial sync copies the partitions again under the middle table and under the leaf's own name (16 fixed it): the expected result is each source row once
-- Three levels of partitions, published via the root at two levels and a
-- leaf by name: everything once, under the topmost published ancestor.
-- @schema
CREATE SCHEMA c34;
CREATE TABLE c34.top (id int, region text, day int, v text, PRIMARY KEY (id, region, day)) PARTITION BY LIST (region);
CREATE TABLE c34.eu PARTITION OF c34.top FOR VALUES IN ('eu') PARTITION BY RANGE (day);
CREATE TABLE c34.eu_early PARTITION OF c34.eu FOR VALUES FROM (0) TO (15);
CREATE TABLE c34.eu_late PARTITION OF c34.eu FOR VALUES FROM (15) TO (32);
CREATE TABLE c34.us PARTITION OF c34.top FOR VALUES IN ('us');
-- @source
INSERT INTO c34.top SELECT g, CASE WHEN g % 2 = 0 THEN 'eu' ELSE 'us' END, g % 31, 'v' FROM generate_series(1, 60) g;
CREATE PUBLICATION p34mid FOR TABLE c34.eu WITH (publish_via_partition_root = true);
CREATE PUBLICATION p34root FOR TABLE c34.top WITH (publish_via_partition_root = true);
CREATE PUBLICATION p34leaf FOR TABLE c34.eu_early;
-- @work
INSERT INTO c34.top VALUES (100, 'eu', 3, 'n'), (101, 'us', 3, 'n');
UPDATE c34.top SET day = 20 WHERE id = 2;
UPDATE c34.top SET region = 'us' WHERE id = 4;
UPDATE c34.top SET region = 'eu', day = 1 WHERE id = 5;
DELETE FROM c34.top WHERE id IN (6, 7);

-- case 35 14 | p35
-- GENERATED ALWAYS identity columns on the target, which an UPDATE can only set to DEFAULT: as the key, beside another key column, outside the key, under replica identity full, and an update whose only other value is unchanged TOAST
-- @schema
CREATE SCHEMA c35;
CREATE TABLE c35.k (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v text, big text);
ALTER TABLE c35.k ALTER COLUMN big SET STORAGE EXTERNAL;
CREATE TABLE c35.pair (id bigint GENERATED ALWAYS AS IDENTITY, region text, v int, PRIMARY KEY (id, region));
CREATE TABLE c35.seqcol (code text PRIMARY KEY, n bigint GENERATED ALWAYS AS IDENTITY, v int);
CREATE TABLE c35.full (n int GENERATED ALWAYS AS IDENTITY, v text);
ALTER TABLE c35.full REPLICA IDENTITY FULL;
CREATE TABLE c35.onlybig (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY, big text);
ALTER TABLE c35.onlybig ALTER COLUMN big SET STORAGE EXTERNAL;
-- @source
INSERT INTO c35.k (v, big) SELECT 'k' || g, repeat(md5(g::text), 200) FROM generate_series(1, 30) g;
INSERT INTO c35.pair (region, v) SELECT CASE WHEN g % 2 = 0 THEN 'eu' ELSE 'us' END, g FROM generate_series(1, 20) g;
INSERT INTO c35.seqcol (code, v) SELECT 'c' || g, g FROM generate_series(1, 20) g;
INSERT INTO c35.full (v) SELECT 'f' || g FROM generate_series(1, 20) g;
INSERT INTO c35.onlybig (big) SELECT repeat(md5(g::text), 200) FROM generate_series(1, 5) g;
CREATE PUBLICATION p35 FOR TABLE c35.k, c35.pair, c35.seqcol, c35.full, c35.onlybig;
-- @work
INSERT INTO c35.k (v, big) VALUES ('new', repeat('x', 9000));
UPDATE c35.k SET v = v || '!' WHERE id % 3 = 0;
UPDATE c35.k SET big = big WHERE id IN (4, 5);
UPDATE c35.onlybig SET big = big WHERE id = 2;
UPDATE c35.pair SET region = 'ap' WHERE id IN (3, 4);
UPDATE c35.pair SET v = v * 10 WHERE id > 15;
UPDATE c35.seqcol SET v = -v WHERE v < 6;
UPDATE c35.seqcol SET code = code || 'x' WHERE v > 15;
UPDATE c35.full SET v = v || '.' WHERE n % 4 = 0;
DELETE FROM c35.full WHERE n = 7;
DELETE FROM c35.k WHERE id = 1;
