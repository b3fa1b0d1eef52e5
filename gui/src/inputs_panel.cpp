// Inputs panel (see inputs_panel.h). Holds no arithmetic: the fields are
// copied into a zeromem::Request as the command line would fill it.
#include "inputs_panel.h"

#include "zeromem/gpu.h"
#include "zeromem/model.h"
#include "zeromem/request_defaults.h"
#include "zeromem/speed.h"

#include <QComboBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>

namespace zeromem_gui {

namespace {

QStringList to_qt(const std::vector<std::string>& v) {
    QStringList out;
    for (const auto& s : v) out << QString::fromStdString(s);
    return out;
}

QSpinBox* spin(int lo, int hi, const QString& suffix) {
    auto* s = new QSpinBox;
    s->setRange(lo, hi);
    s->setSuffix(suffix);
    s->setKeyboardTracking(true);
    return s;
}

std::optional<std::string> text_or_none(const QLineEdit* e) {
    const QString t = e->text().trimmed();
    if (t.isEmpty()) return std::nullopt;
    return t.toStdString();
}

/// Adds a "browse" button that fills `edit` with a chosen JSON file.
QPushButton* open_button(QLineEdit* edit, const QString& what, QWidget* parent) {
    auto* b = new QPushButton(QObject::tr("Open…"), parent);
    b->setToolTip(QObject::tr("Choose %1").arg(what));
    QObject::connect(b, &QPushButton::clicked, parent, [edit, what, parent]() {
        const QString f = QFileDialog::getOpenFileName(parent, what, QString(), QObject::tr("JSON (*.json)"));
        if (!f.isEmpty()) edit->setText(f);
    });
    return b;
}

}  // namespace

InputsPanel::InputsPanel(const std::string& data_dir, QWidget* parent) : QWidget(parent) {
    auto* outer = new QVBoxLayout(this);
    general_error_ = new QLabel(this);
    general_error_->setObjectName("generalError");
    general_error_->setWordWrap(true);
    general_error_->setStyleSheet("color: #b00020;");
    general_error_->hide();
    outer->addWidget(general_error_);
    auto* form = new QFormLayout;
    outer->addLayout(form);
    outer->addStretch(1);
    build_model_group(form, data_dir);
    build_cluster_group(form, data_dir);
    build_training_group(form);
    connect_changes();
}

QWidget* InputsPanel::with_error(QWidget* field, const QString& flag, QWidget* extra) {
    auto* box = new QWidget(this);
    auto* v = new QVBoxLayout(box);
    v->setContentsMargins(0, 0, 0, 0);
    auto* h = new QHBoxLayout;
    h->addWidget(field, 1);
    if (extra) h->addWidget(extra);
    v->addLayout(h);
    box->setFocusProxy(field);  // the row's mnemonic focuses the field
    auto* err = new QLabel(box);
    err->setObjectName("error" + flag);
    err->setWordWrap(true);
    err->setStyleSheet("color: #b00020;");
    err->hide();
    v->addWidget(err);
    errors_[flag] = err;
    return box;
}

void InputsPanel::build_model_group(QFormLayout* form, const std::string& data_dir) {
    model_source = new QComboBox(this);
    model_source->addItems({tr("preset"), tr("parameter count (--params)"), tr("Hugging Face config.json"),
                            tr("module tree (--module-tree)")});
    form->addRow(tr("M&odel from"), model_source);
    preset_search = new QLineEdit(this);
    preset_search->setPlaceholderText(tr("search presets"));
    preset_search->setClearButtonEnabled(true);
    form->addRow(tr("&Search"), preset_search);
    presets = new QListWidget(this);
    presets->addItems(to_qt(zeromem::list_model_presets(data_dir)));
    presets->setMaximumHeight(120);
    form->addRow(tr("Pr&eset"), with_error(presets, "--model"));
    params = new QLineEdit(this);
    params->setPlaceholderText(tr("e.g. 7e9, 7B, 1.3b"));
    form->addRow(tr("Pa&rameters Ψ"), with_error(params, "--params"));
    hf_config = new QLineEdit(this);
    hf_config->setPlaceholderText(tr("path to config.json"));
    form->addRow(tr("&config.json"), with_error(hf_config, "--hf-config", open_button(hf_config, tr("a Hugging Face config.json"), this)));
    module_tree = new QLineEdit(this);
    module_tree->setPlaceholderText(tr("tree.json from python -m zeromem.tree"));
    module_tree->setToolTip(tr("The model as built (zeromem.dump_module_tree): exact total and trainable counts; "
                               "a config.json above, or the one the tree carries, gives the activations"));
    form->addRow(tr("Module t&ree"), with_error(module_tree, "--module-tree", open_button(module_tree, tr("a module tree JSON"), this)));
    connect(preset_search, &QLineEdit::textChanged, this, &InputsPanel::filter_presets);
}

void InputsPanel::build_cluster_group(QFormLayout* form, const std::string& data_dir) {
    gpu = new QComboBox(this);
    gpu->addItems(to_qt(zeromem::list_gpu_presets(data_dir)));
    form->addRow(tr("&GPU type"), with_error(gpu, "--gpu"));
    gpus = spin(1, 65536, tr(" GPUs"));
    form->addRow(tr("GPU co&unt (N)"), with_error(gpus, "--gpus"));
    nodes = spin(1, 65536, tr(" node(s)"));
    form->addRow(tr("&Nodes"), with_error(nodes, "--nodes"));
    const QStringList nets = to_qt(zeromem::list_interconnect_presets(data_dir));
    interconnect = new QComboBox(this);
    interconnect->addItem(tr("(the GPU's default)"), QString());
    for (const QString& n : nets) interconnect->addItem(n, n);
    form->addRow(tr("&Interconnect (in node)"), with_error(interconnect, "--interconnect"));
    network = new QComboBox(this);
    network->addItem(tr("(none: one node)"), QString());
    for (const QString& n : nets) network->addItem(n, n);
    form->addRow(tr("Net&work (between nodes)"), with_error(network, "--network"));
    host_memory = new QLineEdit(this);
    host_memory->setPlaceholderText(tr("per node, e.g. 1TB or 512GiB (empty: unknown)"));
    form->addRow(tr("&Host RAM per node"), with_error(host_memory, "--host-memory"));
    host = new QComboBox(this);
    host->addItem(tr("(none given)"), QString());
    for (const QString& h : to_qt(zeromem::list_host_presets(data_dir))) host->addItem(h, h);
    host->setToolTip(tr("Host preset (--host): CPU cores, DRAM bandwidth, PCIe per GPU; sets the offload speed"));
    form->addRow(tr("Host CPU pro&file (--host)"), with_error(host, "--host"));
}

void InputsPanel::build_training_group(QFormLayout* form) {
    dtype = new QComboBox(this);
    // "auto": as the DeepSpeed config says, else the library's default (bf16, said in a warning),
    // the way the HF Trainer resolves "auto" from its --bf16/--fp16 arguments.
    dtype->addItems({"auto", "bf16", "fp16", "fp32"});
    form->addRow(tr("&dtype"), with_error(dtype, "--dtype"));
    micro_batch = spin(0, 1 << 20, tr(" samples"));
    // Not given: compare (every tab's options) picks the micro batch and the accumulation per option.
    micro_batch->setSpecialValueText(tr("not given: picked per option"));
    micro_batch->setToolTip(tr("Micro batch per GPU; with the accumulation steps and GPUs it sets the global batch "
                               "(compare then uses the largest micro batch that fits it). Neither given: the "
                               "global batch compare uses without --micro-batch and --grad-accum"));
    form->addRow(tr("&Micro batch"), with_error(micro_batch, "--micro-batch"));
    seq_len = spin(1, 1 << 22, tr(" tokens"));
    form->addRow(tr("Se&quence length"), with_error(seq_len, "--seq-len"));
    grad_accum = spin(0, 1 << 20, tr(" steps"));
    grad_accum->setSpecialValueText(tr("not given: picked per option"));
    form->addRow(tr("Gradient &accumulation"), with_error(grad_accum, "--grad-accum"));
    checkpointing = new QComboBox(this);
    checkpointing->addItem(tr("compare none and full"), QString());
    checkpointing->addItem(tr("none only"), QString("none"));
    checkpointing->addItem(tr("full only"), QString("full"));
    form->addRow(tr("Chec&kpointing"), with_error(checkpointing, "--gradient-checkpointing"));
    lora_rank = spin(0, 4096, QString());
    lora_rank->setSpecialValueText(tr("no LoRA"));
    form->addRow(tr("&LoRA rank"), with_error(lora_rank, "--lora-rank"));
    load_in = new QComboBox(this);
    load_in->addItem(tr("training dtype"), QString());
    load_in->addItem(tr("4-bit (QLoRA, bitsandbytes)"), QString("4bit"));
    load_in->addItem(tr("8-bit (bitsandbytes)"), QString("8bit"));
    load_in->setToolTip(tr("Frozen base weights loaded in 4 or 8 bits (--load-in), as with QLoRA"));
    form->addRow(tr("&Base weights"), with_error(load_in, "--load-in"));
    trainable = new QLineEdit(this);
    trainable->setPlaceholderText(tr("count, e.g. 1B (empty: all)"));
    form->addRow(tr("&Trainable params"), with_error(trainable, "--trainable-params"));
    ds_config = new QLineEdit(this);
    ds_config->setPlaceholderText(tr("optional DeepSpeed config JSON"));
    form->addRow(tr("Dee&pSpeed config"), with_error(ds_config, "--ds-config", open_button(ds_config, tr("a DeepSpeed config"), this)));
}

void InputsPanel::connect_changes() {
    auto emit_changed = [this]() { emit changed(); };
    for (QLineEdit* e : {params, hf_config, module_tree, host_memory, trainable, ds_config})
        connect(e, &QLineEdit::textChanged, this, emit_changed);
    for (QComboBox* c : {model_source, gpu, interconnect, network, host, dtype, checkpointing, load_in})
        connect(c, &QComboBox::currentIndexChanged, this, emit_changed);
    for (QSpinBox* s : {gpus, nodes, micro_batch, seq_len, grad_accum, lora_rank})
        connect(s, &QSpinBox::valueChanged, this, emit_changed);
    connect(presets, &QListWidget::currentRowChanged, this, emit_changed);
    // Typing in or picking a model source makes it the one used.
    auto use_source = [this](int i) {
        if (model_source->currentIndex() != i) model_source->setCurrentIndex(i);
    };
    connect(presets, &QListWidget::itemActivated, this, [use_source](QListWidgetItem*) { use_source(0); });
    connect(presets, &QListWidget::itemClicked, this, [use_source](QListWidgetItem*) { use_source(0); });
    connect(params, &QLineEdit::textChanged, this, [use_source](const QString&) { use_source(1); });
    connect(hf_config, &QLineEdit::textChanged, this, [this, use_source](const QString&) {
        if (model_source->currentIndex() != 3) use_source(2);  // a tree's source keeps the config.json beside it
    });
    connect(module_tree, &QLineEdit::textChanged, this, [use_source](const QString&) { use_source(3); });
}

void InputsPanel::filter_presets(const QString& text) {
    for (int i = 0; i < presets->count(); ++i)
        presets->item(i)->setHidden(!presets->item(i)->text().contains(text, Qt::CaseInsensitive));
}

void InputsPanel::set_from(const zeromem::Request& req, const SpeedChoice& speed) {
    const QSignalBlocker block(this);
    QList<QObject*> kids = findChildren<QObject*>();
    for (QObject* k : kids) k->blockSignals(true);
    model_source->setCurrentIndex(req.module_tree ? 3 : req.hf_config ? 2 : req.params && !req.model ? 1 : 0);
    if (req.model) {
        const auto found = presets->findItems(QString::fromStdString(*req.model), Qt::MatchFixedString);
        if (!found.isEmpty()) presets->setCurrentItem(found.front());
    }
    params->setText(QString::fromStdString(req.params.value_or("")));
    hf_config->setText(QString::fromStdString(req.hf_config.value_or("")));
    module_tree->setText(QString::fromStdString(req.module_tree.value_or("")));
    if (req.gpu) gpu->setCurrentIndex(gpu->findText(QString::fromStdString(*req.gpu), Qt::MatchFixedString));
    gpus->setValue(int(req.gpus.value_or(1)));
    nodes->setValue(int(req.nodes.value_or(1)));
    interconnect->setCurrentIndex(std::max(0, interconnect->findData(QString::fromStdString(speed.interconnect))));
    network->setCurrentIndex(std::max(0, network->findData(QString::fromStdString(speed.network))));
    host_memory->setText(QString::fromStdString(req.host_memory.value_or("")));
    dtype->setCurrentIndex(std::max(0, dtype->findText(QString::fromStdString(req.dtype.value_or("auto")))));
    micro_batch->setValue(int(req.micro_batch.value_or(0)));  // 0: not given
    seq_len->setValue(int(req.seq_len.value_or(zeromem::request_defaults().seq_len)));
    grad_accum->setValue(int(req.grad_accum.value_or(0)));
    checkpointing->setCurrentIndex(std::max(0, checkpointing->findData(QString::fromStdString(req.checkpointing.value_or("")))));
    lora_rank->setValue(int(req.lora_rank.value_or(0)));
    load_in->setCurrentIndex(std::max(0, load_in->findData(QString::fromStdString(req.load_in.value_or("")))));
    host->setCurrentIndex(std::max(0, host->findData(QString::fromStdString(speed.host))));
    trainable->setText(QString::fromStdString(req.trainable_params.value_or("")));
    ds_config->setText(QString::fromStdString(req.ds_config.value_or("")));
    for (QObject* k : kids) k->blockSignals(false);
}

zeromem::Request InputsPanel::request(const zeromem::Request& base) const {
    zeromem::Request r = base;
    r.model.reset();
    r.params.reset();
    r.hf_config.reset();
    r.module_tree.reset();
    if (model_source->currentIndex() == 0)  // no row matches an unknown --model: the library names it
        r.model = presets->currentItem() ? presets->currentItem()->text().toStdString() : base.model;
    else if (model_source->currentIndex() == 1)
        r.params = params->text().trimmed().toStdString();
    else if (model_source->currentIndex() == 2)
        r.hf_config = hf_config->text().trimmed().toStdString();
    else if (model_source->currentIndex() == 3) {  // the tree, with the config.json field when it is filled
        r.module_tree = module_tree->text().trimmed().toStdString();
        r.hf_config = text_or_none(hf_config);
    }
    r.gpu = gpu->currentText().toStdString();
    r.gpus = gpus->value();
    r.nodes = nodes->value();
    r.host_memory = text_or_none(host_memory);
    if (dtype->currentText() == "auto")
        r.dtype.reset();
    else
        r.dtype = dtype->currentText().toStdString();
    r.micro_batch = micro_batch->value() > 0 ? std::optional<int64_t>(micro_batch->value()) : std::nullopt;
    r.seq_len = seq_len->value();
    r.grad_accum = grad_accum->value() > 0 ? std::optional<int64_t>(grad_accum->value()) : std::nullopt;
    const QString ck = checkpointing->currentData().toString();
    r.checkpointing = ck.isEmpty() ? std::nullopt : std::optional<std::string>(ck.toStdString());
    r.lora_rank = lora_rank->value() > 0 ? std::optional<int64_t>(lora_rank->value()) : std::nullopt;
    const QString li = load_in->currentData().toString();
    r.load_in = li.isEmpty() ? std::nullopt : std::optional<std::string>(li.toStdString());
    r.trainable_params = text_or_none(trainable);
    r.ds_config = text_or_none(ds_config);
    return r;
}

SpeedChoice InputsPanel::speed() const {
    return {interconnect->currentData().toString().toStdString(), network->currentData().toString().toStdString(),
            host->currentData().toString().toStdString()};
}

void InputsPanel::show_error(const QString& message) {
    clear_errors();
    QString best;
    for (auto it = errors_.constBegin(); it != errors_.constEnd(); ++it) {
        const QString& flag = it.key();
        if (message.startsWith(flag) && message.size() > flag.size() &&
            QString(":/ ").contains(message.at(flag.size())) && flag.size() > best.size())
            best = flag;
    }
    QLabel* target = best.isEmpty() ? general_error_ : errors_[best];
    target->setText(message);
    target->show();
}

void InputsPanel::clear_errors() {
    general_error_->clear();
    general_error_->hide();
    for (QLabel* l : errors_) {
        l->clear();
        l->hide();
    }
}

QString InputsPanel::error_text(const QString& flag) const {
    if (flag.isEmpty()) return general_error_->text();
    const auto it = errors_.find(flag);
    return it == errors_.end() ? QString() : it.value()->text();
}

}  // namespace zeromem_gui
