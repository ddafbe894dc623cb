-- The trial store's tables as xtune made them before its schema had migrations (SQLAlchemy's
-- create_all on SQLite): the schema revision 0001 stands for.
CREATE TABLE experiments (
	id INTEGER NOT NULL,
	name VARCHAR(64) NOT NULL,
	config JSON NOT NULL,
	created FLOAT NOT NULL,
	baseline JSON,
	result JSON,
	PRIMARY KEY (id)
);
CREATE INDEX ix_experiments_name ON experiments (name);
CREATE TABLE trials (
	id INTEGER NOT NULL,
	experiment_id INTEGER NOT NULL,
	"index" INTEGER NOT NULL,
	policy VARCHAR(16) NOT NULL,
	params JSON NOT NULL,
	status VARCHAR(16) NOT NULL,
	objective FLOAT,
	objective_sem FLOAT,
	metrics JSON NOT NULL,
	started FLOAT NOT NULL,
	ended FLOAT NOT NULL,
	PRIMARY KEY (id),
	FOREIGN KEY(experiment_id) REFERENCES experiments (id)
);
CREATE INDEX ix_trials_experiment_id ON trials (experiment_id);
CREATE TABLE measurements (
	id INTEGER NOT NULL,
	experiment_id INTEGER NOT NULL,
	trial_index INTEGER,
	phase VARCHAR(16) NOT NULL,
	t FLOAT NOT NULL,
	objective FLOAT,
	margins JSON NOT NULL,
	knobs JSON NOT NULL,
	PRIMARY KEY (id),
	FOREIGN KEY(experiment_id) REFERENCES experiments (id)
);
CREATE INDEX ix_measurements_experiment_id ON measurements (experiment_id);
CREATE TABLE decisions (
	id INTEGER NOT NULL,
	experiment_id INTEGER NOT NULL,
	t FLOAT NOT NULL,
	policy VARCHAR(16) NOT NULL,
	"values" JSON NOT NULL,
	reason VARCHAR(256) NOT NULL,
	PRIMARY KEY (id),
	FOREIGN KEY(experiment_id) REFERENCES experiments (id)
);
CREATE INDEX ix_decisions_experiment_id ON decisions (experiment_id);
CREATE TABLE rollbacks (
	id INTEGER NOT NULL,
	experiment_id INTEGER NOT NULL,
	trial_index INTEGER,
	t FLOAT NOT NULL,
	reason VARCHAR(512) NOT NULL,
	bad JSON NOT NULL,
	restored JSON NOT NULL,
	windows INTEGER NOT NULL,
	PRIMARY KEY (id),
	FOREIGN KEY(experiment_id) REFERENCES experiments (id)
);
CREATE INDEX ix_rollbacks_experiment_id ON rollbacks (experiment_id);
