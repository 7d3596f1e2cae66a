// elasticdl::RunSql: SQL users' TRAIN and PREDICT statements, as jobs like
// any other (elasticdl/api.h).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <type_traits>
#include <variant>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/job_settings.h"
#include "common/environment.h"
#include "common/file.h"
#include "common/job_dir.h"
#include "common/strings.h"
#include "elasticdl/api.h"
#include "elasticdl/data/record_file.h"
#include "google/protobuf/text_format.h"
#include "sql/database.h"
#include "sql/statement.h"
#include "sql/tabular.h"

namespace elasticdl {
namespace {

namespace fs = std::filesystem;

// The trained model's description as `elasticdl sql` saves it beside the
// trained-model directory's files.
constexpr char kSqlModelFile[] = "sql_model.pbtxt";
// Files are stored in parts of this size (rows of file, part, content).
constexpr size_t kPartBytes = size_t{1} << 20;

std::string SqlModelsDir() {
  if (const char* dir = std::getenv("ELASTICDL_SQL_MODELS_DIR"); dir != nullptr && *dir != '\0') {
    return dir;
  }
  return InstalledShareDir("sql_models");
}

// What the WITH clause holds, by kind.
struct WithClause {
  std::vector<std::string> params;  // the model's: "hidden_units=[10, 20]"
  sql::TabularOptions tabular;
  std::vector<const sql::Attribute*> job;  // train.<flag> / predict.<flag>
};

// The job settings a statement may not set: the statement sets them.
bool SetBySql(const std::string& flag) {
  static const std::set<std::string> kOwned = {
      "--model_zoo",     "--model_def",       "--dataset_fn",
      "--loss",          "--optimizer",       "--eval_metrics_fn",
      "--params",        "--trained_model",   "--checkpoint_dir_for_init",
      "--training_data", "--validation_data", "--prediction_data",
      "--output",        "--detach",          "--job_dir",
      "--no_progress"};
  return kOwned.count(flag) > 0;
}

StatusOr<int64_t> IntegerOf(const sql::Attribute& a) {
  int64_t v = 0;
  const std::string& t = a.value.text;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (a.value.kind != sql::Value::Kind::kInt || ec != std::errc() || end != t.data() + t.size()) {
    return absl::InvalidArgumentError(
        StrCat("WITH ", a.key, "=", a.value.ToString(), ": expected an integer"));
  }
  return v;
}

// Sets the job setting `a` names (train.num_workers=2) in `job`.
Status ApplyJobSetting(const sql::Attribute& a, client::JobCommand command, JobArgs* job) {
  std::string flag = a.key.substr(a.key.find('.') + 1);
  if (flag == "epoch") flag = "num_epochs";  // SQLFlow's spellings
  if (flag == "batch_size") flag = "minibatch_size";
  const std::string name = "--" + flag;
  const client::JobSetting* setting = nullptr;
  for (const client::JobSetting& s : client::JobSettings()) {
    if (client::FlagName(s) == name && (s.commands & client::CommandBit(command)) != 0) {
      setting = &s;
    }
  }
  if (setting == nullptr || SetBySql(name)) {
    return absl::InvalidArgumentError(
        StrCat("WITH ", a.key, ": ",
               setting == nullptr ? "no such setting of the job (`elasticdl "
                                  : "the statement itself sets this one (see `elasticdl ",
               command == client::JobCommand::kTrain ? "train" : "predict", " --help`)"));
  }
  return std::visit(
      [&](auto member) -> Status {
        auto& field = job->*member;
        using T = std::decay_t<decltype(field)>;
        if constexpr (std::is_same_v<T, std::string>) {
          if (a.value.kind == sql::Value::Kind::kList) {
            return absl::InvalidArgumentError(StrCat("WITH ", a.key, ": expected one value"));
          }
          field = a.value.text;
        } else if constexpr (std::is_same_v<T, bool>) {
          if (a.value.text != "true" && a.value.text != "false") {
            return absl::InvalidArgumentError(
                StrCat("WITH ", a.key, "=", a.value.ToString(), ": expected true or false"));
          }
          field = a.value.text == "true";
        } else {
          EDL_ASSIGN_OR_RETURN(int64_t v, IntegerOf(a));
          if constexpr (std::is_same_v<T, uint64_t> || std::is_same_v<T, std::optional<uint64_t>>) {
            if (v < 0) {
              return absl::InvalidArgumentError(StrCat("WITH ", a.key, ": must not be negative"));
            }
            field = static_cast<uint64_t>(v);
          } else {
            field = v;
          }
        }
        return absl::OkStatus();
      },
      setting->field);
}

// The job's settings of the WITH clause.
Status ApplyJobSettings(const WithClause& with, client::JobCommand command, JobArgs* job) {
  for (const sql::Attribute* a : with.job) {
    EDL_RETURN_IF_ERROR(ApplyJobSetting(*a, command, job));
  }
  return absl::OkStatus();
}

// Where and how the statement's job runs.
void RunIn(const SqlArgs& args, const std::string& work, const std::string& name, JobArgs* job) {
  job->job_dir = work + "/job";
  if (job->job_name.empty()) {
    // From a table's name, which may hold anything: its letters and digits.
    job->job_name = name;
    for (char& c : job->job_name) {
      if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-') c = '-';
    }
  }
  job->progress = args.progress;
  job->cancel = args.cancel;
}

StatusOr<WithClause> SplitWith(const std::vector<sql::Attribute>& attributes,
                               const sql::PrebuiltModel* model, client::JobCommand command) {
  WithClause with;
  const std::string job_prefix = command == client::JobCommand::kTrain ? "train." : "predict.";
  for (const sql::Attribute& a : attributes) {
    if (a.key.rfind(job_prefix, 0) == 0) {
      with.job.push_back(&a);
    } else if (model != nullptr && (a.key == "max_vocabulary" || a.key == "hash_buckets")) {
      EDL_ASSIGN_OR_RETURN(int64_t v, IntegerOf(a));
      (a.key == "max_vocabulary" ? with.tabular.max_vocabulary : with.tabular.hash_buckets) = v;
    } else if (model != nullptr && std::find(model->params.begin(), model->params.end(), a.key) !=
                                       model->params.end()) {
      with.params.push_back(StrCat(a.key, "=", a.value.ToString()));
    } else {
      std::string takes = StrCat("the job's settings as ", job_prefix, "<flag> (e.g. ", job_prefix,
                                 "num_workers=2)");
      if (model != nullptr) {
        takes = StrCat(model->name, "'s parameters ", absl::StrJoin(model->params, ", "),
                       "; max_vocabulary and hash_buckets (text columns); and ", takes);
      }
      return absl::InvalidArgumentError(
          StrCat("WITH ", a.key, ": unknown; the statement takes ", takes));
    }
  }
  return with;
}

// The statement's directory, this user's alone (its job's token goes there):
// a new one, or the one --work_dir names if it is theirs.
StatusOr<std::string> WorkDir(const SqlArgs& args) {
  std::string dir;
  if (!args.work_dir.empty()) {
    dir = AbsolutePath(args.work_dir);
    EDL_RETURN_IF_ERROR(Annotate(CreatePrivateDirectory(dir, /*exclusive=*/false), "--work_dir"));
  } else {
    const std::string root = DefaultJobsRoot(ReadEnvironment());
    EDL_RETURN_IF_ERROR(CreatePrivateDirectory(root, /*exclusive=*/false));
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    dir = StrCat(root, "/sql-", std::chrono::duration_cast<std::chrono::milliseconds>(now).count(),
                 "-", ::getpid());
    EDL_RETURN_IF_ERROR(CreatePrivateDirectory(dir, /*exclusive=*/true));
  }
  EDL_RETURN_IF_ERROR(CreateDirectories(dir + "/data"));
  return dir;
}

// Replaces table `name` (`columns`: "\"file\" TEXT", ..., names quoted) by the
// rows `next` gives, in one transaction: readers see the old table or the
// whole new one, and a failure leaves the old one as it was. `name` is any
// name (quoted here), never SQL.
Status ReplaceTable(sql::Database* db, const std::string& name,
                    const std::vector<std::string>& columns,
                    const std::function<StatusOr<bool>(std::vector<sql::Cell>*)>& next) {
  std::string placeholders;
  for (size_t i = 1; i <= columns.size(); ++i) placeholders += StrCat(i > 1 ? ", " : "", "$", i);
  EDL_RETURN_IF_ERROR(db->CheckIdentifier(name));
  const std::string table = db->QuoteIdentifier(name);
  EDL_RETURN_IF_ERROR(db->Execute("BEGIN"));
  Status status = db->Execute(StrCat("DROP TABLE IF EXISTS ", table));
  if (status.ok()) {
    status = db->Execute(StrCat("CREATE TABLE ", table, " (", absl::StrJoin(columns, ", "), ")"));
  }
  if (status.ok()) {
    status =
        db->ExecuteForEach(StrCat("INSERT INTO ", table, " VALUES (", placeholders, ")"), next);
  }
  if (status.ok()) status = db->Execute("COMMIT");
  if (!status.ok()) db->Execute("ROLLBACK").IgnoreError();
  return status;
}

// Replaces table `name` by the files under `dir`, in one transaction.
Status SaveModel(sql::Database* db, const std::string& name, const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file()) files.push_back(fs::relative(it->path(), dir).string());
  }
  if (ec) return absl::InternalError(StrCat("listing ", dir, ": ", ec.message()));
  std::sort(files.begin(), files.end());
  size_t file = 0, offset = 0;
  std::string content;
  const std::vector<std::string> columns = {
      StrCat(db->QuoteIdentifier("file"), " ", db->TypeName(sql::ColumnType::kText)),
      StrCat(db->QuoteIdentifier("part"), " ", db->TypeName(sql::ColumnType::kInteger)),
      StrCat(db->QuoteIdentifier("content"), " ", db->TypeName(sql::ColumnType::kBlob))};
  return ReplaceTable(db, name, columns, [&](std::vector<sql::Cell>* cells) -> StatusOr<bool> {
    while (file < files.size() && offset > 0 && offset >= content.size()) {
      ++file;
      offset = 0;
    }
    if (file >= files.size()) return false;
    if (offset == 0) {
      EDL_ASSIGN_OR_RETURN(content, ReadFileToString(dir + "/" + files[file]));
    }
    const std::string_view part = std::string_view(content).substr(offset, kPartBytes);
    sql::Cell f, p, c;
    f.kind = sql::Cell::Kind::kText;
    f.text = files[file];
    p.kind = sql::Cell::Kind::kInteger;
    p.integer = static_cast<int64_t>(offset / kPartBytes);
    c.kind = sql::Cell::Kind::kBlob;
    c.text = part;
    *cells = {f, p, c};
    // An empty file is one empty part.
    offset += std::max<size_t>(part.size(), 1);
    return true;
  });
}

// Writes the files of model table `name` under `dir`.
Status LoadModel(sql::Database* db, const std::string& name, const std::string& dir) {
  std::string current;
  std::string content;
  int64_t expected_part = 0;
  const auto flush = [&]() -> Status {
    if (current.empty()) return absl::OkStatus();
    const fs::path path = fs::path(dir) / current;
    EDL_RETURN_IF_ERROR(CreateDirectories(path.parent_path().string()));
    return WriteFileAtomically(path.string(), content);
  };
  Status status = db->Query(
      StrCat("SELECT file, part, content FROM ", db->QuoteIdentifier(name), " ORDER BY file, part"),
      [](const std::vector<sql::ColumnInfo>&) { return absl::OkStatus(); },
      [&](const std::vector<sql::Cell>& cells) -> Status {
        const std::string file(cells[0].text);
        if (file.empty() || file.find("..") != std::string::npos || file[0] == '/') {
          return absl::DataLossError(StrCat("a row names the file '", file, "'"));
        }
        if (file != current) {
          EDL_RETURN_IF_ERROR(flush());
          current = file;
          content.clear();
          expected_part = 0;
        }
        if (cells[1].kind != sql::Cell::Kind::kInteger || cells[1].integer != expected_part) {
          return absl::DataLossError(StrCat(file, ": part ", expected_part, " is missing"));
        }
        ++expected_part;
        content.append(cells[2].text);
        return absl::OkStatus();
      });
  if (status.ok()) status = flush();
  if (status.ok() && !fs::exists(fs::path(dir) / kSqlModelFile)) {
    status = absl::InvalidArgumentError(
        StrCat("table ", name, " holds no model trained by a TRAIN ... INTO ", name));
  }
  return Annotate(status,
                  StrCat("cannot read the trained model '", name, "' from ", db->Describe()));
}

void Say(const std::string& line) {
  fmt::print("{}\n", line);
  std::fflush(stdout);  // before the job's own lines
}

StatusOr<SqlResult> RunTrain(const SqlArgs& args, const sql::Statement& statement,
                             sql::Database* db) {
  const sql::TrainClause& train = statement.train;
  // Before the training, not when its model is saved.
  EDL_RETURN_IF_ERROR(Annotate(db->CheckIdentifier(train.into), "INTO"));
  EDL_ASSIGN_OR_RETURN(const sql::PrebuiltModel* model, sql::FindPrebuiltModel(train.model));
  EDL_ASSIGN_OR_RETURN(WithClause with,
                       SplitWith(train.attributes, model, client::JobCommand::kTrain));
  JobArgs job;
  EDL_RETURN_IF_ERROR(ApplyJobSettings(with, client::JobCommand::kTrain, &job));
  EDL_ASSIGN_OR_RETURN(std::string work, WorkDir(args));
  // The query runs once: its rows are recorded for the encoding pass.
  sql::QueryRecording recording;
  recording.rows_path = work + "/data/query.rows";
  EDL_RETURN_IF_ERROR(CreateDirectories(work + "/data"));
  EDL_ASSIGN_OR_RETURN(proto::SqlModel sql_model,
                       sql::DeriveTabular(db, statement.select, train.columns, train.label, *model,
                                          with.tabular, &recording));
  std::vector<std::string> attributes;
  attributes.reserve(train.attributes.size());
  for (const sql::Attribute& a : train.attributes) {
    attributes.push_back(StrCat(a.key, "=", a.value.ToString()));
  }
  sql_model.set_attributes(absl::StrJoin(attributes, ", "));
  const std::string data = work + "/data/train.recordio";
  StatusOr<sql::EncodeResult> encoding =
      sql::EncodeTabular(db, statement.select, sql_model, data, "", &recording);
  std::error_code removed;
  std::filesystem::remove(recording.rows_path, removed);
  EDL_ASSIGN_OR_RETURN(sql::EncodeResult encoded, std::move(encoding));
  std::vector<std::string> inputs;
  for (const proto::SqlColumn& c : sql_model.columns()) {
    inputs.push_back(StrCat(c.name(), c.numeric() ? " (number)"
                                      : c.hash_buckets() > 0
                                          ? StrCat(" (text, ", c.hash_buckets(), " buckets)")
                                          : StrCat(" (text, ", c.vocabulary_size(), " values)")));
  }
  Say(fmt::format(
      "read {} rows: inputs {}; label {}{}", encoded.records, absl::StrJoin(inputs, ", "),
      sql_model.label(),
      sql_model.classifier() ? fmt::format(" ({} classes)", sql_model.classes_size()) : ""));

  job.model_zoo = SqlModelsDir();
  job.model_def = model->name;
  std::string params = sql::TabularParams(sql_model);
  for (const std::string& p : with.params) params += ", " + p;
  job.params = params;
  job.training_data = data;
  job.output = work + "/model";
  RunIn(args, work, "sql-train-" + train.into, &job);
  EDL_ASSIGN_OR_RETURN(JobResult result, Train(job));

  std::string text;
  google::protobuf::TextFormat::PrintToString(sql_model, &text);
  EDL_RETURN_IF_ERROR(WriteFileAtomically(job.output + "/" + kSqlModelFile, text));
  EDL_RETURN_IF_ERROR(
      Annotate(SaveModel(db, train.into, job.output),
               StrCat("saving the trained model as table ", train.into, " of ", db->Describe())));
  std::error_code ec;
  fs::remove(data, ec);  // the rows stay in the database
  SqlResult out;
  out.train = true;
  out.rows = static_cast<int64_t>(encoded.records);
  out.table = train.into;
  out.job = std::move(result);
  out.work_dir = work;
  return out;
}

// The predicted value of one line of predictions.csv
// ("file,index,output_0,...").
StatusOr<sql::Cell> Prediction(const std::string& line, const proto::SqlModel& model,
                               std::string* storage) {
  std::vector<std::string> fields = absl::StrSplit(line, ',');
  const size_t outputs = model.classifier() ? static_cast<size_t>(model.classes_size()) : 1;
  if (fields.size() < outputs + 2) {
    return absl::DataLossError(StrCat("a line of predictions has ", fields.size(),
                                      " fields, expected ", outputs + 2, ": ", line));
  }
  std::vector<double> values;
  for (size_t i = fields.size() - outputs; i < fields.size(); ++i) {
    values.push_back(std::strtod(std::string(fields[i]).c_str(), nullptr));
  }
  sql::Cell cell;
  if (!model.classifier()) {
    cell.kind = sql::Cell::Kind::kReal;
    cell.real = values[0];
    return cell;
  }
  const auto best = std::max_element(values.begin(), values.end()) - values.begin();
  *storage = model.classes(static_cast<int>(best));
  if (model.label_type() == "INTEGER") {
    cell.kind = sql::Cell::Kind::kInteger;
    if (!absl::SimpleAtoi(*storage, &cell.integer)) {
      return absl::DataLossError(StrCat("the model's INTEGER class '", *storage,
                                        "' is not an integer: a damaged model record"));
    }
  } else {
    cell.kind = sql::Cell::Kind::kText;
    cell.text = *storage;
  }
  return cell;
}

StatusOr<SqlResult> RunPredict(const SqlArgs& args, const sql::Statement& statement,
                               sql::Database* db) {
  const sql::PredictClause& predict = statement.predict;
  EDL_RETURN_IF_ERROR(Annotate(db->CheckIdentifier(predict.table), "PREDICT"));
  EDL_RETURN_IF_ERROR(Annotate(db->CheckIdentifier(predict.column), "PREDICT"));
  EDL_RETURN_IF_ERROR(Annotate(db->CheckIdentifier(predict.model), "USING"));
  EDL_ASSIGN_OR_RETURN(WithClause with,
                       SplitWith(predict.attributes, nullptr, client::JobCommand::kPredict));
  JobArgs job;
  EDL_RETURN_IF_ERROR(ApplyJobSettings(with, client::JobCommand::kPredict, &job));
  EDL_ASSIGN_OR_RETURN(std::string work, WorkDir(args));
  const std::string model_dir = work + "/model";
  EDL_RETURN_IF_ERROR(LoadModel(db, predict.model, model_dir));
  proto::SqlModel sql_model;
  EDL_ASSIGN_OR_RETURN(std::string text, ReadFileToString(model_dir + "/" + kSqlModelFile));
  if (!google::protobuf::TextFormat::ParseFromString(text, &sql_model)) {
    return absl::DataLossError(StrCat("the trained model '", predict.model, "' in ", db->Describe(),
                                      " has an unreadable ", kSqlModelFile));
  }
  const std::string data = work + "/data/predict.recordio";
  const std::string rows = work + "/data/rows.recordio";
  EDL_ASSIGN_OR_RETURN(sql::EncodeResult encoded,
                       sql::EncodeTabular(db, statement.select, sql_model, data, rows));
  for (const sql::ColumnInfo& c : encoded.columns) {
    if (absl::AsciiStrToLower(c.name) == absl::AsciiStrToLower(predict.column)) {
      return absl::InvalidArgumentError(StrCat("PREDICT ", predict.table, ".", predict.column,
                                               ": the query already selects a "
                                               "column named '",
                                               c.name, "'; name the predicted column another way"));
    }
  }
  Say(fmt::format("read {} rows: predicting {} with {} ({})", encoded.records, sql_model.label(),
                  predict.model, sql_model.model()));

  job.trained_model = model_dir;
  job.prediction_data = data;
  job.output = work + "/predictions.csv";
  RunIn(args, work, "sql-predict-" + predict.table, &job);
  EDL_ASSIGN_OR_RETURN(JobResult result, Predict(job));

  // The predictions, in the rows' order, beside the rows themselves.
  EDL_ASSIGN_OR_RETURN(std::string csv, ReadFileToString(job.output));
  std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  if (lines.size() != encoded.records + 1) {
    return absl::DataLossError(StrCat("the prediction job wrote ", lines.size() - 1,
                                      " predictions for ", encoded.records, " rows"));
  }
  std::vector<std::string> columns;
  columns.reserve(encoded.columns.size());
  for (const sql::ColumnInfo& c : encoded.columns) {
    columns.push_back(StrCat(db->QuoteIdentifier(c.name), " ", db->TypeName(c.type)));
  }
  const sql::ColumnType predicted_type = sql_model.label_type() == "TEXT" ? sql::ColumnType::kText
                                         : sql_model.label_type() == "INTEGER"
                                             ? sql::ColumnType::kInteger
                                             : sql::ColumnType::kReal;
  columns.push_back(StrCat(db->QuoteIdentifier(predict.column), " ", db->TypeName(predicted_type)));

  // Each row as it was selected, from the rows file, and its prediction.
  EDL_ASSIGN_OR_RETURN(std::unique_ptr<RecordFile> file, RecordFile::Open(rows));
  EDL_ASSIGN_OR_RETURN(std::unique_ptr<RecordScanner> scanner, file->Scan(0, file->num_records()));
  size_t line = 1;
  std::string storage;
  EDL_RETURN_IF_ERROR(
      Annotate(ReplaceTable(db, predict.table, columns,
                            [&](std::vector<sql::Cell>* cells) -> StatusOr<bool> {
                              if (!scanner->Next()) {
                                EDL_RETURN_IF_ERROR(scanner->status());
                                return false;
                              }
                              EDL_RETURN_IF_ERROR(sql::ParseSelectedRow(scanner->record(), cells));
                              EDL_ASSIGN_OR_RETURN(sql::Cell predicted,
                                                   Prediction(lines[line++], sql_model, &storage));
                              cells->push_back(predicted);
                              return true;
                            }),
               StrCat("writing table ", predict.table, " of ", db->Describe())));
  std::error_code ec;
  fs::remove(data, ec);
  fs::remove(rows, ec);
  SqlResult out;
  out.rows = static_cast<int64_t>(encoded.records);
  out.table = predict.table;
  out.job = std::move(result);
  out.work_dir = work;
  return out;
}

}  // namespace

StatusOr<SqlResult> RunSql(const SqlArgs& args) {
  EDL_ASSIGN_OR_RETURN(sql::Statement statement, sql::ParseStatement(args.statement));
  if (args.db.empty()) return absl::InvalidArgumentError("--db: the database is required");
  EDL_ASSIGN_OR_RETURN(std::unique_ptr<sql::Database> db, sql::Database::Open(args.db));
  StatusOr<SqlResult> result = statement.kind == sql::Statement::Kind::kTrain
                                   ? RunTrain(args, statement, db.get())
                                   : RunPredict(args, statement, db.get());
  if (result.ok()) result->database = db->Describe();
  return result;
}

}  // namespace elasticdl
