// The console's VM form. Served as a file: the pages' Content-Security-Policy allows no inline script.
// It fills the OS dropdown from the os-images endpoint of the chosen project, fills vCPU, memory and
// storage from the chosen image's minimums, and refuses smaller values, and values past what the quota
// has free, before the form is sent (the server checks them again). A VM's Delete asks first.

const form = document.getElementById('vm-form');
if (form) setUp(form);
for (const guarded of document.querySelectorAll('form[data-confirm]')) {
  guarded.addEventListener('submit', (event) => {
    if (!window.confirm(guarded.dataset.confirm)) event.preventDefault();
  });
}

function setUp(form) {
  const fields = form.elements;
  const status = document.getElementById('os-status');
  const details = document.getElementById('os-details');
  const defaults = JSON.parse(form.dataset.defaults || '{}');
  const sizes = [
    { input: fields.vcpu, key: 'vcpu', field: 'vcpu', unit: 'vCPU' },
    { input: fields.memory_gib, key: 'memoryGib', field: 'memory_gib', unit: 'GiB of memory' },
    { input: fields.storage_gib, key: 'storageGib', field: 'storage_gib', unit: 'GiB of storage' },
  ];
  let images = [];
  let wanted = form.dataset.selectedOs || '';
  let keepSizes = form.dataset.keepSizes === 'true';
  let loading = 0;

  function namespace() {
    return fields.project.selectedOptions[0]?.dataset.namespace ?? '';
  }

  // What the quota has free for a VM in the chosen project, as the page computed it.
  function free() {
    return JSON.parse(fields.project.selectedOptions[0]?.dataset.free || '{}');
  }

  function showFree() {
    const room = free();
    const line = document.getElementById('free-room');
    if (line && room.vcpu !== undefined)
      line.textContent = `Free in your quota for this project: ${room.vcpu} vCPU · ${room.memory_gib} GiB memory · ${room.storage_gib} GiB storage.`;
    for (const { input } of sizes) check(input);
  }

  async function load() {
    const mine = ++loading;
    fields.os.disabled = true;
    status.textContent = 'Loading operating systems…';
    try {
      const response = await fetch(`/api/create-vm/${encodeURIComponent(namespace())}/os-images`, {
        credentials: 'same-origin',
        headers: { accept: 'application/json' },
      });
      if (response.status === 401) throw new Error('Your session has ended: open a new login link.');
      if (!response.ok) throw new Error(`The list of operating systems could not be loaded (HTTP ${response.status}).`);
      const list = await response.json();
      if (mine !== loading) return;
      images = list;
      fill();
      status.textContent = images.length === 0 ? 'No operating system is offered at the moment.' : '';
    } catch (error) {
      if (mine !== loading) return;
      images = [];
      fill();
      status.textContent = error instanceof TypeError ? 'The list of operating systems could not be loaded.' : error.message;
    } finally {
      if (mine === loading) fields.os.disabled = images.length === 0;
    }
  }

  function fill() {
    const placeholder = new Option(images.length ? 'Choose an operating system' : 'No operating system available', '');
    placeholder.disabled = true;
    fields.os.replaceChildren(placeholder, ...images.map((image) => new Option(image.OS_NAME, image.OS_NAME)));
    const keep = images.some((image) => image.OS_NAME === wanted);
    fields.os.value = keep ? wanted : '';
    placeholder.selected = !keep;
    choose();
  }

  function chosen() {
    return images.find((image) => image.OS_NAME === fields.os.value);
  }

  // A choice fills the sizes with the image's minimums (unless the page is showing a posted form again).
  function choose() {
    const image = chosen();
    wanted = image ? image.OS_NAME : wanted;
    const minimum = image ? minimumsOf(image) : { vcpu: 1, memoryGib: 1, storageGib: 1 };
    for (const { input, key } of sizes) {
      input.min = String(minimum[key]);
      if (image && !keepSizes) input.value = String(minimum[key]);
      check(input);
    }
    keepSizes = false;
    describe(image);
  }

  function check(input) {
    const size = sizes.find((s) => s.input === input);
    const image = chosen();
    const value = Number(input.value);
    const min = Number(input.min || '1');
    const room = free()[size.field];
    input.setCustomValidity(
      image && input.value !== '' && value < min
        ? `${image.OS_NAME} needs at least ${min} ${size.unit}.`
        : room !== undefined && input.value !== '' && value > room
          ? `Your quota has ${room} ${size.unit} free for this project.`
          : '',
    );
  }

  function describe(image) {
    if (!image) {
      details.hidden = true;
      details.replaceChildren();
      return;
    }
    const rows = [
      ['SSH user', image.CLOUD_USER],
      ['Firmware', image.FIRMWARE_TYPE === 'efi' ? 'UEFI' : 'BIOS'],
      ['Machine type', image.MACHINE_TYPE || 'q35'],
      ['Features', image.FEATURES || 'the platform defaults'],
      ['Image', image.OS_IMAGE_URL],
    ];
    if (image.BOOT_ORDER) rows.push(['Boot order', image.BOOT_ORDER]);
    if (image.ADDITIONAL_DISKS) rows.push(['Additional disks', image.ADDITIONAL_DISKS]);
    const items = rows.flatMap(([term, value]) => [element('dt', term), element('dd', value)]);
    if (image.CLOUD_INIT) {
      const pre = element('pre', image.CLOUD_INIT);
      const box = element('details');
      box.append(element('summary', `${image.CLOUD_INIT.split('\n').filter(Boolean).length} lines`), pre);
      const dd = element('dd');
      dd.append(box);
      items.push(element('dt', 'Initial configuration'), dd);
    }
    details.replaceChildren(...items);
    details.hidden = false;
  }

  fields.project.addEventListener('change', () => {
    showFree();
    load();
  });
  fields.os.addEventListener('change', () => choose());
  for (const { input } of sizes) input.addEventListener('input', () => check(input));
  form.addEventListener('submit', (event) => {
    if (!form.checkValidity()) {
      event.preventDefault();
      form.reportValidity();
      return;
    }
    form.querySelector('button[type="submit"]').disabled = true;
  });
  load();

  function minimumsOf(image) {
    const memory = /^(\d+(?:\.\d+)?)([GM])$/.exec(image.MIN_MEMORY || '');
    const storage = /^(\d+(?:\.\d+)?)G$/.exec(image.MIN_STORAGE || '');
    return {
      vcpu: image.MIN_VCPU ? Number(image.MIN_VCPU) : defaults.vcpu,
      memoryGib: memory ? Math.max(1, Math.ceil(memory[2] === 'G' ? Number(memory[1]) : Number(memory[1]) / 1024)) : defaults.memoryGib,
      storageGib: storage ? Math.max(1, Math.ceil(Number(storage[1]))) : defaults.storageGib,
    };
  }
}

function element(tag, text) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  return node;
}
